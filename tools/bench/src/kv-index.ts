// Precise prefix-cache routing benchmark (issue 21), three parts in one run:
// 1. Index update lag: a batch published on a real ZMQ socket → kv-indexer → NATS delta → a scheduler's index
//    (what the scorer reads), p50/p99, against a bare NATS publish → subscribe of the same delta (the baseline).
// 2. Index memory per million (source, block) entries (heap after GC; run with --expose-gc), against the block
//    keys alone.
// 3. Prefix-heavy routing in simulated time, on the routing benchmark's cluster simulator (tools/bench/src/cluster-sim,
//    docs/routing-benchmark.md): the `chat` workload (long shared system prompts, multi-turn) on engines with bounded
//    KV pools that evict; Triad's default profile with precise-prefix-cache (an index fed by the engines' own block
//    events) vs the same profile with the approximate prefix-cache vs random, same seeded requests: prefix-hit
//    ratio and TTFT.
// Lag is wall-clock (process.hrtime) on this machine; routing is simulated time (machine load changes nothing).
// Run: npx tsx --expose-gc tools/bench/src/kv-index.ts [--batches 2000] [--rate 500] [--blocks 1000000]
//        [--engines 16] [--requests 3000] [--loads 0.8,0.95] [--seed 1] [--kv-tokens 32768]
import { Buckets, EndpointRecordSchema, KvIndexDeltaSchema, SCHEMA_VERSION, endpointKey } from '@triad/bus';
import { connectBus } from '@triad/bus/client';
import { KvIndexer, VllmBlockHasher, ZmqEventPublisher, encodeKvEventBatch, startKvIndexFeed } from '@triad/kv-events';
import { KvBlockIndex, defaultSchedulerConfig } from '@triad/scheduling';
import { startNatsServer, parseToolArgs } from '@triad/testing';
import { REALISTIC_COST } from './cluster-sim/cost-model';
import type { CacheListener } from './cluster-sim/engine';
import { SchedulerPolicy, kvBlockKey } from './cluster-sim/policies';
import { makePolicy } from './cluster-sim/policy-set';
import { measureCapacity, runSimulation } from './cluster-sim/simulate';
import { WORKLOADS } from './cluster-sim/workload';
import { markdownTable } from './lib/table';

const { values: args } = parseToolArgs({
  options: {
    batches: { type: 'string', default: '2000' },
    rate: { type: 'string', default: '500' },
    blocks: { type: 'string', default: '1000000' },
    engines: { type: 'string', default: '16' },
    requests: { type: 'string', default: '3000' },
    loads: { type: 'string', default: '0.8,0.95' },
    seed: { type: 'string', default: '1' },
    'kv-tokens': { type: 'string', default: '32768' },
  },
});
// Engines with a smaller KV pool than the realistic profile's (a bigger model on the same GPU), so prefixes get evicted.
const COST = { ...REALISTIC_COST, kvCapacityTokens: Number(args['kv-tokens']) };
const pct = (xs: number[], p: number): number =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))] ?? NaN;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const hasher = new VllmBlockHasher({ algo: 'sha256_cbor', seed: '0', blockSize: 16 });

async function lag(batches: number, rate: number): Promise<string[][]> {
  const nats = await startNatsServer();
  const bus = await connectBus({ servers: nats.url, name: 'bench-indexer' });
  const sched = await connectBus({ servers: nats.url, name: 'bench-scheduler' });
  const pub = await ZmqEventPublisher.start({ endpoint: 'tcp://127.0.0.1:*' });
  const endpoints = await bus.kv(Buckets.endpoints, EndpointRecordSchema);
  await endpoints.put(
    endpointKey('default', 'ms', 'p'),
    EndpointRecordSchema.parse({
      schemaVersion: 1,
      namespace: 'default',
      modelServer: 'ms',
      pod: 'p',
      role: 'aggregated',
      ip: '127.0.0.1',
      port: 8000,
      engine: 'vLLM',
      kvEvents: { endpoint: pub.endpoint },
      ready: true,
      models: ['m'],
      metrics: { running: 0, waiting: 0, kvCacheUsage: 0, scrapedAt: 0, stale: false },
      updatedAt: 0,
    }),
  );
  // Event published → the scheduler's index holds it (what the scorer reads next), timed with process.hrtime.
  const lags: number[] = [];
  const sentAt = new Map<string, bigint>();
  class TimedIndex extends KvBlockIndex {
    override store(source: string, pod: string, keys: readonly string[]): void {
      super.store(source, pod, keys);
      const now = process.hrtime.bigint();
      for (const k of keys) {
        const sent = sentAt.get(k);
        if (sent === undefined) continue;
        lags.push(Number(now - sent) / 1e6);
        sentAt.delete(k);
      }
    }
  }
  const feed = await startKvIndexFeed(sched, new TimedIndex());
  const indexer = new KvIndexer({
    bus,
    instanceId: 'bench',
    logger: { info: () => undefined, warn: () => undefined },
    metrics: { inc: () => undefined },
  });
  await indexer.start();
  while (!indexer.followerOf('default/p')?.live) await sleep(10);
  for (let i = 0; i < batches; i++) {
    const tokens = Array.from({ length: 64 }, (_, j) => i * 64 + j);
    const digests = hasher.digests(tokens);
    sentAt.set(hasher.keys(tokens.slice(0, 16))[0], process.hrtime.bigint());
    await pub.publish(
      encodeKvEventBatch('vllm', Date.now() / 1000, [{ type: 'stored', hashes: digests, parent: undefined, tokens, blockSize: 16 }]),
    );
    await sleep(1000 / rate);
  }
  while (lags.length < batches * 0.99) await sleep(20);
  // Baseline: the same delta, straight from a NATS publisher to a subscriber.
  const base: number[] = [];
  const baseSent = new Map<number, bigint>();
  const sub = sched.subscribe('bench.kv', KvIndexDeltaSchema, (d) => {
    const sent = baseSent.get(d.seq);
    if (sent !== undefined) base.push(Number(process.hrtime.bigint() - sent) / 1e6);
  });
  await sched.nc.flush();
  for (let i = 0; i < batches; i++) {
    baseSent.set(i, process.hrtime.bigint());
    bus.publish('bench.kv', KvIndexDeltaSchema, {
      v: SCHEMA_VERSION,
      source: 'default/p',
      pod: 'default/p',
      epoch: 'e',
      seq: i,
      stored: ['0123456789abcdef', '0123456789abcdee', '0123456789abcded', '0123456789abcdec'],
      removed: [],
      publishedAt: Date.now(),
    });
    await sleep(1000 / rate);
  }
  while (base.length < batches * 0.99) await sleep(20);
  sub.unsubscribe();
  feed.stop();
  await indexer.close();
  await pub.close();
  await bus.close();
  await sched.close();
  await nats.close();
  return [
    ['NATS publish → subscribe (baseline)', String(base.length), pct(base, 50).toFixed(2), pct(base, 99).toFixed(2)],
    ['engine ZMQ batch → indexer → NATS → scheduler index', String(lags.length), pct(lags, 50).toFixed(2), pct(lags, 99).toFixed(2)],
  ];
}

function memory(blocks: number): string[][] {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) return [['(run with --expose-gc)', '', '']];
  const keyOf = (i: number): string => ((BigInt(i) * 0x9e3779b97f4a7c15n) & 0xffffffffffffffffn).toString(16).padStart(16, '0');
  gc();
  const h0 = process.memoryUsage().heapUsed;
  const keys = Array.from({ length: blocks }, (_, i) => keyOf(i));
  gc();
  const h1 = process.memoryUsage().heapUsed;
  const index = new KvBlockIndex({ maxEntries: blocks * 2 });
  const sources = 8;
  // Each source holds an eighth of the keys plus a shared tenth (system prompts held everywhere).
  for (let s = 0; s < sources; s++) {
    index.setLive(`ns/p${s}`, `ns/p${s}`, true);
    const mine = keys.filter((_, i) => i % sources === s || i % 10 === 0);
    for (let i = 0; i < mine.length; i += 10_000) index.store(`ns/p${s}`, `ns/p${s}`, mine.slice(i, i + 10_000));
  }
  gc();
  const h2 = process.memoryUsage().heapUsed;
  const entries = index.stats().entries;
  return [
    ['block keys alone (16-char strings)', String(blocks), ((h1 - h0) / blocks).toFixed(1), ((h1 - h0) / 1e6 / (blocks / 1e6)).toFixed(1)],
    [
      'KvBlockIndex (owners + per-source order)',
      String(entries),
      ((h2 - h1) / entries).toFixed(1),
      ((h2 - h1) / 1e6 / (entries / 1e6)).toFixed(1),
    ],
  ];
}

/** Triad's default profile with precise-prefix-cache in place of prefix-cache (its args as the fallback's). */
function preciseConfig(): unknown {
  const config = defaultSchedulerConfig();
  const prefix = config.plugins.find((p) => p.type === 'prefix-cache');
  return {
    ...config,
    plugins: [
      ...config.plugins.filter((p) => p.type !== 'prefix-cache'),
      { type: 'precise-prefix-cache', args: { blockSize: REALISTIC_COST.blockTokens, ...(prefix?.args ? { fallback: prefix.args } : {}) } },
    ],
    profiles: Object.fromEntries(
      Object.entries(config.profiles).map(([role, profile]) => [
        role,
        {
          ...profile,
          scorers: profile.scorers.map((s) => (s.plugin === 'prefix-cache' ? { ...s, plugin: 'precise-prefix-cache' } : s)),
        },
      ]),
    ),
  };
}

function routing(engines: number, requests: number, loads: readonly number[], seed: number): string[][] {
  const workload = WORKLOADS.chat;
  const capacity = measureCapacity(workload, engines, COST, seed, (e) => makePolicy('oracle', e));
  const rows: string[][] = [];
  for (const load of loads) {
    for (const name of ['precise-prefix-cache (KV events)', 'prefix-cache (approximate)', 'random'] as const) {
      const precise = name.startsWith('precise');
      const index = new KvBlockIndex();
      for (let e = 0; e < engines; e++) index.setLive(`default/e${e}`, `default/e${e}`, true);
      let evicted = 0;
      // The engines' block events, applied as the scheduler's feed applies the indexer's deltas (no lag in simulated time).
      const listener: CacheListener = {
        stored: (e, keys) => {
          if (precise) index.store(`default/e${e}`, `default/e${e}`, keys.map(kvBlockKey));
        },
        removed: (e, keys) => {
          evicted += keys.length;
          if (precise) index.remove(`default/e${e}`, keys.map(kvBlockKey));
        },
      };
      const policyFor = precise
        ? (pool: Parameters<typeof makePolicy>[1]) =>
            new SchedulerPolicy(pool, { name, config: preciseConfig(), mediaAwareHashes: true, sessions: true, kvIndex: index })
        : name === 'random'
          ? (e: Parameters<typeof makePolicy>[1]) => makePolicy('random', e)
          : (e: Parameters<typeof makePolicy>[1]) => makePolicy('triad', e);
      const m = runSimulation(policyFor, { workload, capacity, engines, load, requests, seed, cost: COST, cacheListener: listener });
      rows.push([
        `${Math.round(load * 100)} %`,
        name,
        (m.prefixHit * 100).toFixed(1),
        String(Math.round(m.ttftP50)),
        String(Math.round(m.ttftP99)),
        m.goodput.toFixed(1),
        String(evicted),
      ]);
    }
  }
  return rows;
}

async function main(): Promise<void> {
  process.stdout.write(
    `## Index update lag (ms)\n\n${markdownTable(['path', 'batches', 'p50 ms', 'p99 ms'], await lag(Number(args.batches), Number(args.rate)))}\n\n`,
  );
  process.stdout.write(
    `## Index memory\n\n${markdownTable(['what', 'entries', 'bytes/entry', 'MB per million'], memory(Number(args.blocks)))}\n\n`,
  );
  const engines = Number(args.engines);
  const cpu0 = process.cpuUsage();
  const rows = routing(engines, Number(args.requests), args.loads.split(',').map(Number), Number(args.seed));
  const cpu = process.cpuUsage(cpu0);
  process.stdout.write(
    `## Prefix-heavy routing, simulated time (chat workload: ${WORKLOADS.chat.description}; ${engines} engines, ` +
      `${COST.kvCapacityTokens} KV tokens each; ${args.requests} requests per run, seed ${args.seed})\n\n` +
      `${markdownTable(['load', 'scorer', 'prefix-hit %', 'TTFT p50 ms', 'TTFT p99 ms', 'goodput req/s', 'blocks evicted'], rows)}\n\n` +
      `(${((cpu.user + cpu.system) / 1e6).toFixed(1)} s CPU for the simulations)\n`,
  );
}

void main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
    process.exit(1);
  },
);
