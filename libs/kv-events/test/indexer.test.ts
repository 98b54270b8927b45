import { Buckets, EndpointRecordSchema, endpointKey, type EndpointRecord } from '@triad/bus';
import { connectBus, type Bus } from '@triad/bus/client';
import { KvBlockIndex } from '@triad/scheduling';
import { startNatsServer, waitFor, type NatsServerHandle } from '@triad/testing';
import { encode } from '@msgpack/msgpack';
import {
  KvIndexer,
  VllmBlockHasher,
  ZmqEventPublisher,
  encodeKvEventBatch,
  startKvIndexFeed,
  type FollowerCounter,
  type KvIndexFeed,
} from '../src/index';

const hasher = new VllmBlockHasher({ algo: 'sha256_cbor', seed: '0', blockSize: 4 });
const tokens = (base: number, blocks: number): number[] => Array.from({ length: blocks * 4 }, (_, i) => base + i);
const quiet = { info: () => undefined, warn: () => undefined };

class Counts {
  readonly by = new Map<string, number>();
  inc(c: FollowerCounter, pod: string, n = 1): void {
    this.by.set(`${c}:${pod}`, (this.by.get(`${c}:${pod}`) ?? 0) + n);
  }
  get(c: FollowerCounter, pod: string): number {
    return this.by.get(`${c}:${pod}`) ?? 0;
  }
}

function record(pod: string, endpoint: string, replayEndpoint?: string): EndpointRecord {
  return EndpointRecordSchema.parse({
    schemaVersion: 1,
    namespace: 'default',
    modelServer: 'ms',
    pod,
    role: 'aggregated',
    ip: '127.0.0.1',
    port: 8000,
    engine: 'vLLM',
    kvEvents: { endpoint, ...(replayEndpoint ? { replayEndpoint } : {}) },
    ready: true,
    models: ['m'],
    metrics: { running: 0, waiting: 0, kvCacheUsage: 0, scrapedAt: 0, stale: false },
    updatedAt: 0,
  });
}

/** Publishes a BlockStored batch for `toks` (vLLM wire form, bytes hashes) and returns the block keys. */
async function store(pub: ZmqEventPublisher, toks: number[], opts: { lose?: boolean } = {}): Promise<string[]> {
  const digests = hasher.digests(toks);
  await pub.publish(
    encodeKvEventBatch('vllm', Date.now() / 1000, [{ type: 'stored', hashes: digests, parent: undefined, tokens: toks, blockSize: 4 }]),
    opts,
  );
  return digests.map((d) => Buffer.from(d.subarray(24)).toString('hex'));
}

function matched(index: KvBlockIndex, keys: string[], pod = 'default/p0'): number {
  let n = 0;
  index.prefixMatches(keys, (p, blocks) => {
    if (p === pod) n = blocks;
  });
  return n;
}

describe('KV indexer: engine socket → NATS deltas and snapshots → scheduler index', () => {
  let nats: NatsServerHandle;
  let bus: Bus;
  let schedBus: Bus;
  let pub: ZmqEventPublisher;
  let indexer: KvIndexer;
  let feed: KvIndexFeed;
  const counts = new Counts();
  const index = new KvBlockIndex();

  beforeAll(async () => {
    nats = await startNatsServer();
    bus = await connectBus({ servers: nats.url, name: 'indexer-test' });
    schedBus = await connectBus({ servers: nats.url, name: 'scheduler-test' });
    pub = await ZmqEventPublisher.start({ endpoint: 'tcp://127.0.0.1:*', replayEndpoint: 'tcp://127.0.0.1:*' });
    const endpoints = await bus.kv(Buckets.endpoints, EndpointRecordSchema);
    await endpoints.put(endpointKey('default', 'ms', 'p0'), record('p0', pub.endpoint, pub.replayEndpoint));
    // A pod whose socket never answers: nothing listens on port 1.
    await endpoints.put(endpointKey('default', 'ms', 'dead'), record('dead', 'tcp://127.0.0.1:1'));
    feed = await startKvIndexFeed(schedBus, index);
    indexer = new KvIndexer({
      bus,
      instanceId: 'idx-a',
      logger: quiet,
      metrics: counts,
      snapshotIntervalMs: 100,
      limits: { connectTimeoutMs: 300 },
    });
    await indexer.start();
    await waitFor(() => indexer.followerOf('default/p0')?.live, { what: 'the follower to connect' });
  });

  afterAll(async () => {
    feed.stop();
    await indexer.close();
    await pub.close();
    await bus.close();
    await schedBus.close();
    await nats.close();
  });

  it('indexes stored blocks and forgets removed ones', async () => {
    const keys = await store(pub, tokens(100, 3));
    await waitFor(() => matched(index, keys) === 3, { what: 'three blocks indexed' });
    const digests = hasher.digests(tokens(100, 3));
    await pub.publish(encodeKvEventBatch('vllm', Date.now() / 1000, [{ type: 'removed', hashes: [digests[2]] }]));
    await waitFor(() => matched(index, keys) === 2, { what: 'the removed block gone' });
  });

  it('replays a batch the transport lost', async () => {
    const lost = await store(pub, tokens(200, 2), { lose: true });
    const next = await store(pub, tokens(300, 1));
    await waitFor(() => matched(index, next) === 1 && matched(index, lost) === 2, { what: 'the lost batch replayed' });
    expect(counts.get('gaps', 'default/p0')).toBeGreaterThanOrEqual(1);
    expect(counts.get('replays', 'default/p0')).toBeGreaterThanOrEqual(1);
  });

  it('skips malformed payloads and unknown event types, counted, and keeps going', async () => {
    await pub.publish(Buffer.from('definitely not msgpack'));
    await pub.publish(encode([Date.now() / 1000, [{ type: 'BlockMoved', block_hashes: [] }], 0]));
    const keys = await store(pub, tokens(400, 1));
    await waitFor(() => matched(index, keys) === 1, { what: 'the batch after the bad ones' });
    expect(counts.get('malformed', 'default/p0')).toBe(1);
    expect(counts.get('unknown_events', 'default/p0')).toBe(1);
  });

  it('clears the source when the engine restarts (sequence back to 0)', async () => {
    const before = await store(pub, tokens(500, 2));
    await waitFor(() => matched(index, before) === 2, { what: 'blocks before the restart' });
    pub.resetSequence();
    const after = await store(pub, tokens(600, 1));
    await waitFor(() => matched(index, after) === 1, { what: 'blocks after the restart' });
    expect(matched(index, before)).toBe(0);
    expect(counts.get('restarts', 'default/p0')).toBe(1);
  });

  it('reports a socket that never connects as down, so its pod is scored by the fallback', async () => {
    await waitFor(() => counts.get('connect_failures', 'default/dead') === 1, { what: 'the connect timeout' });
    await waitFor(() => indexer.followerOf('default/dead')?.reason?.startsWith('cannot connect'), { what: 'the reason' });
    expect(index.podIsLive('default/dead')).toBe(false);
    expect(index.podIsLive('default/p0')).toBe(true);
  });

  it('lets a scheduler that starts late catch up from the snapshot', async () => {
    const keys = await store(pub, tokens(700, 2));
    await waitFor(() => matched(index, keys) === 2, { what: 'blocks indexed' });
    await indexer.publisher.flushSnapshots();
    const late = new KvBlockIndex();
    const lateFeed = await startKvIndexFeed(schedBus, late);
    try {
      await lateFeed.synced;
      await waitFor(() => matched(late, keys) === 2, { what: 'the late index loaded' });
      expect([...late.blocksOf('default/p0')].sort()).toEqual([...index.blocksOf('default/p0')].sort());
    } finally {
      lateFeed.stop();
    }
  });
});
