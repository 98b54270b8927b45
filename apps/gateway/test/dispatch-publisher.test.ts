import { connect, type NatsConnection } from '@nats-io/transport-node';
import { DispatchBatchSchema, Subjects, decodeMessage, type DispatchBatch } from '@triad/bus';
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
});
