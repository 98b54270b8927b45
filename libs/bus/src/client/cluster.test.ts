import { z } from 'zod';
import { jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { startNatsCluster, waitFor, type NatsClusterHandle } from '@triad/testing';
import { connectBus, type Bus } from './bus';
import { NOT_YET_VISIBLE, isJetStreamConflict, isTransientJetStreamError, retryJetStream } from './js-retry';

const Value = z.object({ n: z.number() });

async function streamInfo(bus: Bus, bucket: string): Promise<{ replicas: number; leader: string | undefined }> {
  // Asked like every other JetStream call: through a leader election or the client's reconnect it is retried.
  const info = await retryJetStream(async () => (await jetstreamManager(bus.nc)).streams.info(`KV_${bucket}`));
  return { replicas: info.config.num_replicas, leader: info.cluster?.leader };
}

describe('Bus against a 3-node clustered JetStream', () => {
  let cluster: NatsClusterHandle;
  let writer: Bus;
  let reader: Bus;
  beforeAll(async () => {
    cluster = await startNatsCluster({ size: 3 });
    // Each client is given every seed, but starts on a different node.
    writer = await connectBus({ servers: cluster.url, name: 'writer', kvReplicas: 3 });
    const [first, ...rest] = cluster.urls;
    reader = await connectBus({ servers: [...rest, first], name: 'reader', kvReplicas: 3 });
  }, 60_000);
  afterAll(async () => {
    await writer?.close();
    await reader?.close();
    await cluster?.close();
  });

  it('creates KV buckets with the configured replicas and raises a bucket created with fewer', async () => {
    await writer.kv('cluster_fresh', Value);
    expect((await streamInfo(writer, 'cluster_fresh')).replicas).toBe(3);
    await new Kvm(writer.nc).create('cluster_old', { history: 1, replicas: 1 });
    expect((await streamInfo(writer, 'cluster_old')).replicas).toBe(1);
    const kv = await reader.kv('cluster_old', Value);
    expect((await streamInfo(writer, 'cluster_old')).replicas).toBe(3);
    await kv.put('k', { n: 1 });
    expect(await kv.get('k')).toEqual({ n: 1 });
  });

  it('keeps writes, reads and watches going when the node leading the bucket is killed, and after it returns', async () => {
    const kvW = await writer.kv('cluster_state', Value);
    const kvR = await reader.kv('cluster_state', Value);
    await kvW.put('counter', { n: 0 });
    let seen = -1;
    const watch = await kvR.watch({
      key: 'counter',
      onChange: (c) => {
        if (c.op === 'PUT') seen = c.value.n;
      },
    });
    await watch.synced;
    const { leader } = await streamInfo(writer, 'cluster_state');
    const victim = cluster.nodes.find((n) => n.name === leader);
    expect(victim).toBeDefined();
    await victim?.kill();
    // Every write goes through (retried across the election); none is lost.
    for (let i = 1; i <= 10; i++) await kvW.put('counter', { n: i });
    // KV reads are direct gets, which any replica answers: a follower may serve the previous value for a moment.
    await waitFor(async () => (await kvR.get('counter'))?.n === 10, { what: 'a reader on another node to read the last write' });
    // The watch's consumer may have lived on the killed node: it is found gone within a check (2 s + a 5 s
    // request timeout) and replaced once the stream has a leader again, which the writes above waited for.
    await waitFor(() => seen === 10, { what: 'the watcher on another client to see the last write', timeoutMs: 30_000 });
    const after = await streamInfo(writer, 'cluster_state');
    expect(after.leader).not.toBe(leader);
    await victim?.start();
    await cluster.waitForJetStream({ expectPeers: 3 });
    await kvW.put('counter', { n: 11 });
    await waitFor(() => seen === 11, { what: 'the watcher after the node returned' });
    // The returned node catches up: a client connected only to it reads the last value.
    const direct = await connectBus({ servers: victim?.url as string, name: 'direct' });
    try {
      await waitFor(async () => (await (await direct.kv('cluster_state', Value)).get('counter'))?.n === 11, {
        what: 'the restarted node to serve the current value',
      });
    } finally {
      await direct.close();
    }
    watch.stop();
  }, 90_000);

  it('opens new buckets and syncs their watches from every surviving node right after a node is lost', async () => {
    // A service started after a node's loss creates its buckets on a cluster whose meta layer is still settling:
    // a node that has not applied a creation yet answers "stream not found" (or "consumer not found") to the
    // checks that follow it. Those are retried, so every bucket opens and every watch syncs.
    const victim = cluster.nodes[2];
    await victim.kill();
    const clients = await Promise.all(
      cluster.nodes.filter((n) => n !== victim).map((n, i) => connectBus({ servers: n.url, name: `late-${i}`, kvReplicas: 3 })),
    );
    try {
      const opened = await Promise.all(
        clients.flatMap((bus, c) =>
          Array.from({ length: 6 }, async (_, b) => {
            const kv = await bus.kv(`late_${b}`, Value);
            if (c === 0) await kv.put(`from-${c}`, { n: b });
            const watch = await kv.watch({ onChange: () => undefined });
            await watch.synced;
            watch.stop();
            return `late_${b}`;
          }),
        ),
      );
      expect(new Set(opened).size).toBe(6);
      for (let b = 0; b < 6; b++) expect((await streamInfo(writer, `late_${b}`)).replicas).toBe(3);
    } finally {
      await Promise.all(clients.map((c) => c.close()));
      await victim.start();
      await cluster.waitForJetStream({ expectPeers: 3 });
    }
  }, 90_000);

  it('retries "not found" only for a call that was told the stream or consumer exists', async () => {
    const notFound = Object.assign(new Error('stream not found'), { name: 'StreamNotFoundError' });
    expect(isTransientJetStreamError(notFound)).toBe(false);
    let calls = 0;
    const failTwice = async () => {
      if (++calls < 3) throw notFound;
      return 'ok';
    };
    await expect(retryJetStream(failTwice)).rejects.toThrow('stream not found');
    expect(calls).toBe(1);
    calls = 0;
    await expect(retryJetStream(failTwice, { alsoTransient: NOT_YET_VISIBLE })).resolves.toBe('ok');
    expect(calls).toBe(3);
  });

  it('retries only transient JetStream failures, never a compare-and-set conflict', async () => {
    const kv = await writer.kv('cluster_cas', Value);
    const rev = await kv.put('k', { n: 1 });
    await kv.put('k', { n: 2 });
    let calls = 0;
    const stale = await retryJetStream(() => {
      calls++;
      return kv.update('k', { n: 3 }, rev);
    }).catch((e: unknown) => e);
    expect(isJetStreamConflict(stale)).toBe(true);
    expect(calls).toBe(1);
    const exists = await retryJetStream(() => kv.create('k', { n: 4 })).catch((e: unknown) => e);
    expect(isJetStreamConflict(exists)).toBe(true);
    expect(isTransientJetStreamError(exists)).toBe(false);
    const timeout = Object.assign(new Error('timeout'), { name: 'TimeoutError' });
    expect(isTransientJetStreamError(timeout)).toBe(true);
    expect(isTransientJetStreamError(Object.assign(new Error('connection closed'), { name: 'ClosedConnectionError' }))).toBe(false);
    let tries = 0;
    await expect(
      retryJetStream(async () => {
        tries++;
        if (tries < 3) throw timeout;
        return 'ok';
      }),
    ).resolves.toBe('ok');
    expect(tries).toBe(3);
  });
});
