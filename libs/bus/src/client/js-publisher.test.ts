import { z } from 'zod';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { Kvm } from '@nats-io/kv';
import { startNatsServer, type NatsServerHandle } from '@triad/testing';
import { JetStreamPublisher } from './js-publisher';
import { isTransientJetStreamError } from './js-retry';
import { connectBus, type Bus } from './bus';

const text = new TextEncoder();

describe('JetStreamPublisher against a real nats-server', () => {
  let server: NatsServerHandle;
  let nc: NatsConnection;
  let bus: Bus;
  beforeAll(async () => {
    server = await startNatsServer();
    nc = await connect({ servers: server.url });
    bus = await connectBus({ servers: server.url, name: 'publisher-test' });
  });
  afterAll(async () => {
    await bus?.close();
    await nc?.close();
    await server?.close();
  });

  it('stores each put in the bucket and resolves to its sequence, many in flight at once', async () => {
    const kv = await new Kvm(nc).create('pub_a', { history: 1 });
    const publisher = new JetStreamPublisher(nc);
    const seqs = await Promise.all(
      Array.from({ length: 200 }, (_, i) => publisher.publish(`$KV.pub_a.k${i % 20}`, text.encode(String(i)))),
    );
    expect([...seqs].sort((a, b) => a - b)).toEqual(Array.from({ length: 200 }, (_, i) => i + 1));
    // Each key holds its last write, at the sequence the publish resolved to.
    const entry = await kv.get('k7');
    expect(entry?.string()).toBe('187');
    expect(entry?.revision).toBe(seqs[187]);
    expect(publisher.inFlight).toBe(0);
  });

  it('rejects a subject no stream stores as a 503 (retried through an election), a refusal as final', async () => {
    const publisher = new JetStreamPublisher(nc);
    const none = await publisher.publish('$KV.no_such_bucket.k', text.encode('1')).catch((e: Error) => e);
    expect(none).toMatchObject({ status: 503 });
    expect(isTransientJetStreamError(none)).toBe(true);
    await new Kvm(nc).create('pub_small', { history: 1, maxValueSize: 8 });
    const refused = await publisher.publish('$KV.pub_small.k', text.encode('more than eight bytes')).catch((e: Error) => e);
    expect(refused).toMatchObject({ name: 'JetStreamApiError' });
    expect((refused as Error).message).toMatch(/size/i);
    expect(isTransientJetStreamError(refused)).toBe(false);
  });

  it('times out a publish nobody acknowledges, and rejects those in flight when the connection closes', async () => {
    // A plain subscriber is a responder (no 503) that never answers.
    const silent = nc.subscribe('silent.>');
    const publisher = new JetStreamPublisher(nc, { timeoutMs: 200 });
    const late = await publisher.publish('silent.a', text.encode('1')).catch((e: Error) => e);
    expect(late).toMatchObject({ name: 'TimeoutError' });
    expect(isTransientJetStreamError(late)).toBe(true);
    silent.unsubscribe();

    const own = await connect({ servers: server.url });
    own.subscribe('silent2.>');
    const slow = new JetStreamPublisher(own, { timeoutMs: 60_000 });
    const pending = slow.publish('silent2.a', text.encode('1')).catch((e: Error) => e);
    await own.flush();
    expect(slow.inFlight).toBe(1);
    await own.close();
    const closed = await pending;
    expect(closed).toMatchObject({ name: 'ClosedConnectionError' });
    expect(isTransientJetStreamError(closed)).toBe(false);
    await expect(slow.publish('x', text.encode('1'))).rejects.toThrow(/closed/i);
  });

  it('is what a bucket put goes through: invalid keys refused before anything is sent', async () => {
    const kv = await bus.kv('pub_typed', z.object({ n: z.number() }));
    const rev = await kv.put('a.b', { n: 1 });
    expect(await kv.getEntry('a.b')).toEqual({ value: { n: 1 }, revision: rev });
    await expect(kv.put('a b', { n: 2 })).rejects.toThrow(/invalid key/);
    await expect(kv.put('.a', { n: 2 })).rejects.toThrow(/invalid key/);
    await expect(kv.put('a.', { n: 2 })).rejects.toThrow(/invalid key/);
    expect(await kv.keys()).toEqual(['a.b']);
  });
});
