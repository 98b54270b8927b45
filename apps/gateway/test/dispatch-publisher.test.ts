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
    reader.subscribe(Subjects.dispatch, { callback: (_e, m) => {
      const d = decodeMessage(DispatchBatchSchema, m.data);
      if (d.ok) got.push(d.value);
    } });
    await reader.flush();
    const local: string[] = [];
    const p = new DispatchPublisher(nc, 'gw-1', 60_000, new TurnFlusher(), (e) => local.push(`${e.type}:${e.endpoint}`));
    p.start();
    p.started('r1', 'ns.ms.a', 'prefill', 10);
    p.started('r1', 'ns.ms.b', 'decode', 10);
    p.finished('r1', 'ns.ms.a', 'prefill', true, undefined);
    await waitFor(() => got.length === 2, { what: 'snapshot and one event batch' });
    expect(got[0]).toMatchObject({ gateway: 'gw-1', seq: 0, events: [], inflight: {}, snapshotIntervalMs: 60_000 });
    expect(got[1]?.seq).toBe(1);
    expect(got[1]?.events.map((e) => [e.type, e.endpoint, e.stage])).toEqual([['start', 'ns.ms.a', 'prefill'], ['start', 'ns.ms.b', 'decode'], ['finish', 'ns.ms.a', 'prefill']]);
    expect(local).toEqual(['start:ns.ms.a', 'start:ns.ms.b', 'finish:ns.ms.a']);
    p.snapshot();
    await waitFor(() => got.length === 3, { what: 'second snapshot' });
    expect(got[2]?.inflight).toEqual({ 'ns.ms.b': 1 });
    p.stop();
  });
});
