import { connect, type NatsConnection } from '@nats-io/transport-node';
import { DispatchBatchSchema, Subjects, decodeMessage, readDispatchBatch, type DispatchBatch, type DispatchEvent } from '@triad/bus';
import { startNatsServer, waitFor, type NatsServerHandle } from '@triad/testing';
import { DispatchPublisher } from '../src/dispatch/dispatch-publisher';
import { TurnFlusher } from '../src/nats/turn-flusher';

describe('DispatchPublisher against a real nats-server', () => {
  let nats: NatsServerHandle;
  let nc: NatsConnection;
  let reader: NatsConnection;
  beforeAll(async () => {
    nats = await startNatsServer({ jetstream: false });
    nc = await connect({ servers: nats.url });
    reader = await connect({ servers: nats.url });
  });
  afterAll(async () => {
    await nc?.close();
    await reader?.close();
    await nats?.close();
  });

  it('sends a snapshot first, coalesces the events of one turn into one valid message, and keeps in-flight counts', async () => {
    const got: DispatchBatch[] = [];
    reader.subscribe(Subjects.dispatch, {
      callback: (_e, m) => {
        const d = decodeMessage(DispatchBatchSchema, m.data);
        if (d.ok) got.push(d.value);
      },
    });
    await reader.flush();
    const local: string[] = [];
    const p = new DispatchPublisher(nc, 'gw-1', { snapshotIntervalMs: 60_000 }, new TurnFlusher(), (e) =>
      local.push(`${e.type}:${e.endpoint}`),
    );
    p.start();
    p.started('r1', 'ns.ms.a', 'prefill', 10);
    p.started('r1', 'ns.ms.b', 'decode', 10);
    p.finished('r1', 'ns.ms.a', 'prefill', true, undefined);
    await waitFor(() => got.length === 2, { what: 'snapshot and one event batch' });
    expect(got[0]).toMatchObject({ gateway: 'gw-1', seq: 0, events: [], inflight: {}, snapshotIntervalMs: 60_000 });
    expect(got[1]?.seq).toBe(1);
    expect(got[1]?.events.map((e) => [e.type, e.endpoint, e.stage])).toEqual([
      ['start', 'ns.ms.a', 'prefill'],
      ['start', 'ns.ms.b', 'decode'],
      ['finish', 'ns.ms.a', 'prefill'],
    ]);
    expect(local).toEqual(['start:ns.ms.a', 'start:ns.ms.b', 'finish:ns.ms.a']);
    p.snapshot();
    await waitFor(() => got.length === 3, { what: 'second snapshot' });
    expect(got[2]?.inflight).toEqual({ 'ns.ms.b': 1 });
    p.stop();
  });

  it(
    'with a flush window, events of several turns share one message, sent with the next scheduling batch or when the window ' + 'ends',
    async () => {
      const got: DispatchBatch[] = [];
      const sub = reader.subscribe(Subjects.dispatch, {
        callback: (_e, m) => {
          const d = decodeMessage(DispatchBatchSchema, m.data);
          if (d.ok && d.value.gateway !== 'gw-1') got.push(d.value);
        },
      });
      await reader.flush();
      const nextTurn = () => new Promise<void>((r) => setImmediate(r));
      const turn = new TurnFlusher();
      let batchesSent = 0;
      // Stands in for the scheduler client: another member of the same turn flusher.
      turn.add({ flushTurn: () => batchesSent++ });
      const long = new DispatchPublisher(nc, 'gw-long', { snapshotIntervalMs: 60_000, flushWindowMs: 60_000 }, turn);
      long.started('r1', 'ns.ms.e', 'encode', 5);
      await nextTurn();
      long.finished('r1', 'ns.ms.e', 'encode', true, undefined);
      long.started('r1', 'ns.ms.d', 'decode', 5);
      await nextTurn();
      await nc.flush();
      await reader.flush();
      expect(got).toEqual([]);
      turn.request(); // a scheduling batch goes out: the pending events ride along
      await waitFor(() => got.length === 1, { what: 'events with the scheduling batch' });
      expect(batchesSent).toBe(1);
      expect(got[0]?.events.map((e) => `${e.type}:${e.endpoint}`)).toEqual(['start:ns.ms.e', 'finish:ns.ms.e', 'start:ns.ms.d']);

      const short = new DispatchPublisher(nc, 'gw-short', { snapshotIntervalMs: 60_000, flushWindowMs: 20 }, new TurnFlusher());
      short.started('r2', 'ns.ms.p', 'prefill', 5);
      await nextTurn();
      short.finished('r2', 'ns.ms.p', 'prefill', true, 1);
      await waitFor(() => got.length === 2, { what: 'events when the window ends' });
      expect(got[1]).toMatchObject({ gateway: 'gw-short', seq: 0 });
      expect(got[1]?.events.map((e) => `${e.type}:${e.endpoint}`)).toEqual(['start:ns.ms.p', 'finish:ns.ms.p']);
      long.stop();
      short.stop();
      sub.unsubscribe();
    },
  );

  it('runs what waits alongside the events in their flush, and a lone one opens the window itself', async () => {
    const order: string[] = [];
    const sub = reader.subscribe(Subjects.dispatch, {
      callback: (_e, m) => {
        const d = decodeMessage(DispatchBatchSchema, m.data);
        if (d.ok && d.value.gateway === 'gw-riders') order.push(`events:${d.value.events.length}`);
      },
    });
    await reader.flush();
    const turn = new TurnFlusher();
    const p = new DispatchPublisher(nc, 'gw-riders', { snapshotIntervalMs: 60_000, flushWindowMs: 60_000 }, turn);
    p.started('r1', 'ns.ms.e', 'encode', 5);
    p.alongside(() => order.push('rider 1'));
    await new Promise((r) => setImmediate(r));
    expect(order).toEqual([]);
    turn.request(); // a scheduling batch: the events and the rider go now
    await waitFor(() => order.length === 2, { what: 'the flush' });
    expect(order).toEqual(['rider 1', 'events:1']);
    const short = new DispatchPublisher(nc, 'gw-riders-2', { snapshotIntervalMs: 60_000, flushWindowMs: 10 }, new TurnFlusher());
    short.alongside(() => order.push('rider 2'));
    await waitFor(() => order.length === 3, { what: 'a lone rider sent when its window ends' });
    expect(order[2]).toBe('rider 2');
    p.stop();
    short.stop();
    sub.unsubscribe();
  });

  it('writes the packed legs as JSON.stringify would, and they read back as the events it handed on, without ok and outputTokens', async () => {
    const texts: string[] = [];
    const sub = reader.subscribe(Subjects.dispatch, {
      callback: (_e, m) => {
        const text = m.string();
        if ((JSON.parse(text) as { gateway: string }).gateway.startsWith('gw-"packed"')) texts.push(text);
      },
    });
    await reader.flush();
    const handed: DispatchEvent[] = [];
    // A gateway id and request ids that need escaping (quote, backslash, control character, lone surrogate), one
    // that does not, a non-ASCII one, and latencies with fractions.
    const p = new DispatchPublisher(nc, 'gw-"packed"\\', { snapshotIntervalMs: 60_000 }, new TurnFlusher(), (e) => handed.push({ ...e }));
    const ids = [
      '9b1c2f4e-0d7a-4c55-b1b2-3a0e5f6d7c8b',
      'r"1',
      'r\\2',
      'r\n3',
      'r\ud8004',
      'é🙂5',
      'r\u001f6',
      'r \u007f\u2028\ud7ff\ue0007',
    ];
    for (const id of ids) {
      p.started(id, 'ns.ms.e-0', 'encode', undefined);
      p.finished(id, 'ns.ms.e-0', 'encode', true, undefined);
      p.started(id, 'ns.ms.p-0', 'prefill', 600);
      p.finished(id, 'ns.ms.p-0', 'prefill', false, undefined, { ttftMs: 41.26 });
    }
    p.started('r7', 'ns.ms.d-"1"', 'decode', 0);
    p.finished('r7', 'ns.ms.d-"1"', 'decode', true, 16, { ttftMs: 3, tpotMs: 0.125 });
    p.started('r8', 'ns.ms.a', 'aggregated', 12);
    p.finished('r8', 'ns.ms.a', 'aggregated', true, 4, { ttftMs: 1e-7, tpotMs: 12345.67 });
    await waitFor(() => texts.length === 1, { what: 'the packed batch' });
    const text = texts[0];
    expect(text).toBe(JSON.stringify(JSON.parse(text)));
    const raw = JSON.parse(text) as { events: unknown[]; packed: { requests: string[]; endpoints: string[]; legs: unknown[] } };
    expect(raw.events).toEqual([]);
    expect(raw.packed.requests).toEqual([...ids, 'r7', 'r8']);
    expect(raw.packed.endpoints).toEqual(['ns.ms.e-0', 'ns.ms.p-0', 'ns.ms.d-"1"', 'ns.ms.a']);
    expect(raw.packed.legs).toHaveLength(handed.length);
    const expected = handed.map(({ ok: _ok, outputTokens: _out, ...e }) => e);
    const fast = readDispatchBatch(JSON.parse(text));
    const schema = DispatchBatchSchema.parse(JSON.parse(text));
    expect(fast?.events).toEqual(expected);
    expect(schema.events).toEqual(expected);
    expect(fast).toEqual(schema);
    expect(schema).toMatchObject({ v: 1, gateway: 'gw-"packed"\\', seq: 0 });
    p.stop();
    sub.unsubscribe();
  });

  it('with the events wire, sends each event as an object, as schedulers from before the packed legs read them', async () => {
    const got: unknown[] = [];
    const sub = reader.subscribe(Subjects.dispatch, {
      callback: (_e, m) => {
        const raw = JSON.parse(m.string()) as { gateway: string };
        if (raw.gateway === 'gw-events') got.push(raw);
      },
    });
    await reader.flush();
    const p = new DispatchPublisher(nc, 'gw-events', { snapshotIntervalMs: 60_000, wire: 'events' }, new TurnFlusher());
    p.started('r1', 'ns.ms.p', 'prefill', 10);
    p.finished('r1', 'ns.ms.p', 'prefill', true, 1, { ttftMs: 2.5 });
    await waitFor(() => got.length === 1, { what: 'the batch' });
    expect(got[0]).not.toHaveProperty('packed');
    expect(got[0]).toMatchObject({
      events: [
        { type: 'start', requestId: 'r1', endpoint: 'ns.ms.p', stage: 'prefill', inputTokens: 10 },
        { type: 'finish', requestId: 'r1', endpoint: 'ns.ms.p', stage: 'prefill', ok: true, outputTokens: 1, ttftMs: 2.5 },
      ],
    });
    p.stop();
    sub.unsubscribe();
  });
});
