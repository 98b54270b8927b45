import { createHook } from 'node:async_hooks';
import { connect, type Msg, type NatsConnection } from '@nats-io/transport-node';
import { SCHEDULER_QUEUE_GROUP, Subjects, type SchedulingRequest } from '@triad/bus';
import { startNatsServer, waitFor, type NatsServerHandle } from '@triad/testing';
import { TurnFlusher } from '../src/nats/turn-flusher';
import { SchedulerClient, type LocalReason } from '../src/scheduling/scheduler-client';

const enc = new TextEncoder();
const dec = new TextDecoder();
const request = (id: string): SchedulingRequest => ({
  id,
  namespace: 'ns',
  modelServer: 'ms',
  model: 'm',
  prefixHashes: [],
  mediaItems: [],
});
const decision = (id: string, by: string) => ({
  id,
  ok: true,
  mode: 'aggregated',
  attempts: [{ endpoint: { key: 'k', pod: 'p', ip: '127.0.0.1', port: 1 } }],
  encoders: [],
  decidedBy: by,
});

/** Follows the timers of one duration armed from now on: created (async_hooks init) until cleared or fired (destroy). */
function liveTimeoutsOf(durationMs: number): { count(): number; stop(): void } {
  const live = new Set<number>();
  const hook = createHook({
    init(asyncId, type, _trigger, resource) {
      if (type === 'Timeout' && (resource as { _idleTimeout?: number })._idleTimeout === durationMs) live.add(asyncId);
    },
    destroy(asyncId) {
      live.delete(asyncId);
    },
  }).enable();
  return { count: () => live.size, stop: () => hook.disable() };
}

describe('SchedulerClient against a real nats-server', () => {
  let nats: NatsServerHandle;
  let gateway: NatsConnection;
  let scheduler: NatsConnection;
  const local = { schedule: (r: SchedulingRequest) => decision(r.id, 'local') as never };
  beforeAll(async () => {
    nats = await startNatsServer({ jetstream: false });
    gateway = await connect({ servers: nats.url });
    scheduler = await connect({ servers: nats.url });
  });
  afterAll(async () => {
    await gateway?.close();
    await scheduler?.close();
    await nats?.close();
  });

  /**
   * A scheduler that holds every batch it gets (no reply until the test sends one) and a client whose 600 s budget
   * no test waits out (its timer is told apart by that duration), recording why it decided locally.
   */
  async function heldBatchesAndClient(maxInFlight: number) {
    const held: Msg[] = [];
    const sub = scheduler.subscribe(Subjects.schedule, {
      callback: (_e, m) => {
        held.push(m);
      },
    });
    await scheduler.flush();
    const reasons: LocalReason[] = [];
    const client = new SchedulerClient(
      gateway,
      local,
      { budgetMs: 600_000, backoffMs: 0, maxBatch: 8, maxInFlight, onLocal: (r) => reasons.push(r) },
      new TurnFlusher(),
    );
    const stop = async (): Promise<void> => {
      sub.unsubscribe();
      await scheduler.flush();
    };
    return { held, reasons, client, stop };
  }

  it('coalesces what arrives while a batch is in flight into the next message, in order, with no timer', async () => {
    const held: Msg[] = [];
    const sizes: number[] = [];
    const sub = scheduler.subscribe(Subjects.schedule, {
      queue: SCHEDULER_QUEUE_GROUP,
      callback: (_e, m) => {
        held.push(m);
      },
    });
    await scheduler.flush();
    const answer = (m: Msg) => {
      const batch = JSON.parse(dec.decode(m.data)) as { requests: SchedulingRequest[] };
      sizes.push(batch.requests.length);
      m.respond(enc.encode(JSON.stringify({ v: 1, decisions: batch.requests.map((r) => decision(r.id, 'svc')) })));
    };
    const client = new SchedulerClient(gateway, local, { budgetMs: 5000, backoffMs: 0, maxBatch: 3, maxInFlight: 1 }, new TurnFlusher());
    const first = client.schedule(request('r0'));
    await waitFor(() => held.length === 1, { what: 'first batch' });
    const rest = ['r1', 'r2', 'r3', 'r4'].map((id) => client.schedule(request(id)));
    answer(held.shift() as Msg);
    await first;
    await waitFor(() => held.length === 1, { what: 'second batch' });
    answer(held.shift() as Msg);
    await waitFor(() => held.length === 1, { what: 'third batch' });
    answer(held.shift() as Msg);
    const results = await Promise.all(rest);
    expect(sizes).toEqual([1, 3, 1]);
    expect(results.map((r) => [r.decision.id, r.local])).toEqual([
      ['r1', false],
      ['r2', false],
      ['r3', false],
      ['r4', false],
    ]);
    sub.unsubscribe();
    await scheduler.flush();
  });

  it('decides locally when nobody serves the subject, then backs off from the scheduler for a while', async () => {
    const reasons: LocalReason[] = [];
    const client = new SchedulerClient(
      gateway,
      local,
      { budgetMs: 1000, backoffMs: 60_000, maxBatch: 8, maxInFlight: 2, onLocal: (r) => reasons.push(r) },
      new TurnFlusher(),
    );
    const a = await client.schedule(request('a'));
    const b = await client.schedule(request('b'));
    expect([a.local, b.local]).toEqual([true, true]);
    expect(a.decision).toMatchObject({ id: 'a', decidedBy: 'local' });
    expect(reasons).toEqual(['unavailable', 'backoff']);
  });

  it('decides locally when the reply is late or malformed', async () => {
    const sub = scheduler.subscribe(Subjects.schedule, {
      callback: (_e, m) => {
        const batch = JSON.parse(dec.decode(m.data)) as { requests: SchedulingRequest[] };
        if (batch.requests[0]?.id === 'bad') m.respond(enc.encode(JSON.stringify({ v: 1, decisions: [] })));
      },
    });
    await scheduler.flush();
    const reasons: LocalReason[] = [];
    const client = new SchedulerClient(
      gateway,
      local,
      { budgetMs: 100, backoffMs: 0, maxBatch: 8, maxInFlight: 2, onLocal: (r) => reasons.push(r) },
      new TurnFlusher(),
    );
    expect((await client.schedule(request('bad'))).local).toBe(true);
    expect((await client.schedule(request('slow'))).local).toBe(true);
    expect(reasons).toEqual(['invalid-reply', 'timeout']);
    sub.unsubscribe();
    await scheduler.flush();
  });

  it('runs one budget timer for the batches in flight: a batch whose budget has not run out stays in flight when it fires', async () => {
    const { held, reasons, client, stop } = await heldBatchesAndClient(2);
    const budgetTimers = liveTimeoutsOf(600_000);
    const first = client.schedule(request('first'));
    await waitFor(() => held.length === 1, { what: 'the first batch at the scheduler' });
    const second = client.schedule(request('second'));
    await waitFor(() => held.length === 2, { what: 'the second batch at the scheduler' });
    // Two batches in flight, one timer (armed with the first).
    expect(budgetTimers.count()).toBe(1);
    budgetTimers.stop();
    // The timer firing before any budget ran out (as a timer may, by a fraction of a millisecond) decides nothing.
    client.budgetTimerFired();
    expect(client.inFlight).toBe(2);
    expect(reasons).toEqual([]);
    held[1].respond(enc.encode(JSON.stringify({ v: 1, decisions: [decision('second', 'scheduler')] })));
    expect(await second).toMatchObject({ local: false, decision: { id: 'second', decidedBy: 'scheduler' } });
    held[0].respond(enc.encode(JSON.stringify({ v: 1, decisions: [decision('first', 'scheduler')] })));
    expect(await first).toMatchObject({ local: false, decision: { id: 'first', decidedBy: 'scheduler' } });
    expect(client.inFlight).toBe(0);
    client.close();
    await stop();
  });

  it('close() decides a batch waiting for its reply locally at once and leaves no budget timer behind', async () => {
    const { held, reasons, client, stop } = await heldBatchesAndClient(1);
    // Counting every live Timeout in the process flaked: NATS and waitFor arm and clear their own timers meanwhile.
    // The budget timer is told apart by its unique 600,000 ms duration, followed from creation to clearTimeout.
    const budgetTimers = liveTimeoutsOf(600_000);
    const sent = client.schedule(request('sent'));
    await waitFor(() => held.length === 1, { what: 'the batch at the scheduler' });
    // Behind the in-flight limit: queued, not sent.
    const queued = client.schedule(request('queued'));
    expect(budgetTimers.count()).toBe(1);
    client.close();
    // async_hooks reports clearTimeout's destroy on a later tick; a 600 s timer cannot have fired instead.
    await waitFor(() => budgetTimers.count() === 0, { what: 'the budget timer cleared' });
    budgetTimers.stop();
    const results = await Promise.all([sent, queued]);
    expect(results.map((r) => [r.decision.id, r.local])).toEqual([
      ['sent', true],
      ['queued', true],
    ]);
    expect((await client.schedule(request('after'))).local).toBe(true);
    expect(reasons).toEqual(['unavailable', 'unavailable', 'unavailable']);
    // Nothing more went to the scheduler: the queued request and the later one never left the gateway.
    await new Promise((resolve) => setImmediate(resolve));
    await gateway.flush();
    await scheduler.flush();
    expect(held).toHaveLength(1);
    await stop();
  });
});
