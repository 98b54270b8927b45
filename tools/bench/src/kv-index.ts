// Precise prefix-cache routing benchmark (issue 21), three parts in one run:
// 1. Index update lag: a batch published on a real ZMQ socket → kv-indexer → NATS delta → a scheduler's index
//    (what the scorer reads), p50/p99, against a bare NATS publish → subscribe of the same delta (the baseline).
// 2. Index memory per million (source, block) entries (heap after GC; run with --expose-gc), against the block
//    keys alone.
// 3. Prefix-heavy routing: pods with LRU KV caches of real vLLM block hashes; requests share a few long system
//    prompts; precise (index fed by the caches' own events) vs approximate (Kthena prefix-cache, which never hears
//    of evictions) vs random, same requests: prefix-hit ratio and a modelled prefill time of the uncached tokens.
// Run: npx tsx --expose-gc tools/bench/src/kv-index.ts [--batches 2000] [--rate 500] [--blocks 1000000] [--requests 4000]
import { parseArgs } from 'node:util';
import { Buckets, EndpointRecordSchema, KvIndexDeltaSchema, SCHEMA_VERSION, endpointKey } from '@triad/bus';
import { connectBus } from '@triad/bus/client';
import { KvIndexer, VllmBlockHasher, ZmqEventPublisher, encodeKvEventBatch, startKvIndexFeed } from '@triad/kv-events';
import { KvBlockIndex, PRECISE_PREFIX_CACHE, PrecisePrefixCacheParamsSchema, PrecisePrefixCacheScorer, prefixBlockHashes } from '@triad/scheduling';
import { applyScorer, buildIndex, candidatesOf, pluginContext, schedulingRequest } from '@triad/scheduling/testing';
import { startNatsServer } from '@triad/testing';
import { markdownTable } from './lib/table';

const { values: args } = parseArgs({ options: {
  batches: { type: 'string', default: '2000' }, rate: { type: 'string', default: '500' }, blocks: { type: 'string', default: '1000000' },
  requests: { type: 'string', default: '4000' },
} });
const pct = (xs: number[], p: number): number => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))] ?? NaN;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const hasher = new VllmBlockHasher({ algo: 'sha256_cbor', seed: '0', blockSize: 16 });

async function lag(batches: number, rate: number): Promise<string[][]> {
  const nats = await startNatsServer();
  const bus = await connectBus({ servers: nats.url, name: 'bench-indexer' });
  const sched = await connectBus({ servers: nats.url, name: 'bench-scheduler' });
  const pub = await ZmqEventPublisher.start({ endpoint: 'tcp://127.0.0.1:*' });
  const endpoints = await bus.kv(Buckets.endpoints, EndpointRecordSchema);
  await endpoints.put(endpointKey('default', 'ms', 'p'), EndpointRecordSchema.parse({
    schemaVersion: 1, namespace: 'default', modelServer: 'ms', pod: 'p', role: 'aggregated', ip: '127.0.0.1', port: 8000, engine: 'vLLM',
    kvEvents: { endpoint: pub.endpoint }, ready: true, models: ['m'], metrics: { running: 0, waiting: 0, kvCacheUsage: 0, scrapedAt: 0, stale: false }, updatedAt: 0,
  }));
  const lags: number[] = [];
  const feed = await startKvIndexFeed(sched, new KvBlockIndex(), { onLag: (ms) => lags.push(ms) });
  const indexer = new KvIndexer({ bus, instanceId: 'bench', logger: { info: () => undefined, warn: () => undefined }, metrics: { inc: () => undefined } });
  await indexer.start();
  while (!indexer.followerOf('default/p')?.live) await sleep(10);
  for (let i = 0; i < batches; i++) {
    const tokens = Array.from({ length: 64 }, (_, j) => i * 64 + j);
    await pub.publish(encodeKvEventBatch('vllm', Date.now() / 1000, [{ type: 'stored', hashes: hasher.digests(tokens), parent: undefined, tokens, blockSize: 16 }]));
    await sleep(1000 / rate);
  }
  while (lags.length < batches * 0.99) await sleep(20);
  // Baseline: the same delta, straight from a NATS publisher to a subscriber.
  const base: number[] = [];
  const sub = sched.subscribe('bench.kv', KvIndexDeltaSchema, (d) => base.push(Date.now() - d.publishedAt));
  await sched.nc.flush();
  for (let i = 0; i < batches; i++) {
    bus.publish('bench.kv', KvIndexDeltaSchema, { v: SCHEMA_VERSION, source: 'default/p', pod: 'default/p', epoch: 'e', seq: i, stored: ['0123456789abcdef', '0123456789abcdee', '0123456789abcded', '0123456789abcdec'], removed: [], publishedAt: Date.now() });
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
  const keyOf = (i: number): string => (BigInt(i) * 0x9e3779b97f4a7c15n & 0xffffffffffffffffn).toString(16).padStart(16, '0');
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
    ['KvBlockIndex (owners + per-source order)', String(entries), ((h2 - h1) / entries).toFixed(1), ((h2 - h1) / 1e6 / (entries / 1e6)).toFixed(1)],
  ];
}

function routing(requests: number): string[][] {
  const pods = ['p0', 'p1', 'p2', 'p3', 'p4', 'p5', 'p6', 'p7'];
  const capacity = 2_000; // blocks per engine: with 24 system prompts of 64 blocks, not everything fits everywhere
  const prefillMsPerToken = 0.1;
  const systems = Array.from({ length: 24 }, (_, s) => Array.from({ length: 64 * 16 }, (_, i) => 10_000 + s * 5000 + i));
  const results: string[][] = [];
  for (const policy of ['precise', 'approximate', 'random'] as const) {
    let rand = 42;
    const next = (): number => ((rand = (Math.imul(rand, 1103515245) + 12345) >>> 0) / 2 ** 32);
    const caches = pods.map(() => new Map<string, true>());
    const index = new KvBlockIndex();
    for (const p of pods) index.setLive(`default/${p}`, `default/${p}`, true);
    const scorer = new PrecisePrefixCacheScorer('s', PRECISE_PREFIX_CACHE, PrecisePrefixCacheParamsSchema.parse({}), index);
    const endpoints = buildIndex(pods.map((pod) => ({ pod })));
    let hit = 0;
    let total = 0;
    let prefillMs = 0;
    for (let r = 0; r < requests; r++) {
      const sys = systems[Math.floor(Math.pow(next(), 2) * systems.length)] as number[];
      const tokens = [...sys, ...Array.from({ length: 128 }, () => Math.floor(next() * 30_000))];
      const keys = hasher.keys(tokens);
      const text = tokens.join(' ');
      const req = schedulingRequest({ id: `r${r}`, model: 'm', prefixHashes: prefixBlockHashes('m', text), ...(policy === 'precise' ? { kvBlockHashes: keys } : {}) });
      let chosen: number;
      if (policy === 'random') chosen = Math.floor(next() * pods.length);
      else {
        const scores = applyScorer(policy === 'precise' ? scorer : scorer.fallback, pluginContext({ request: req }), candidatesOf(endpoints, pods));
        const best = Math.max(...scores);
        const top = scores.flatMap((s, i) => (s === best ? [i] : []));
        chosen = top[Math.floor(next() * top.length)] as number;
        if (policy === 'approximate') scorer.fallback.postSchedule(pluginContext({ request: req }), endpoints.get(`default.ms.${pods[chosen]}`) as never);
      }
      const cache = caches[chosen] as Map<string, true>;
      let matched = 0;
      while (matched < keys.length && cache.has(keys[matched] as string)) matched++;
      hit += matched * 16;
      total += tokens.length;
      prefillMs += (tokens.length - matched * 16) * prefillMsPerToken;
      const stored: string[] = [];
      for (const k of keys) {
        if (cache.delete(k)) cache.set(k, true);
        else {
          cache.set(k, true);
          stored.push(k);
        }
      }
      const removed: string[] = [];
      while (cache.size > capacity) {
        const oldest = cache.keys().next().value as string;
        cache.delete(oldest);
        removed.push(oldest);
      }
      // The engine's events, as the indexer would deliver them.
      index.store(`default/${pods[chosen]}`, `default/${pods[chosen]}`, stored);
      index.remove(`default/${pods[chosen]}`, removed);
    }
    results.push([policy, String(requests), ((hit / total) * 100).toFixed(1), (prefillMs / requests).toFixed(1)]);
  }
  return results;
}

async function main(): Promise<void> {
  process.stdout.write(`## Index update lag (ms)\n\n${markdownTable(['path', 'batches', 'p50 ms', 'p99 ms'], await lag(Number(args.batches), Number(args.rate)))}\n\n`);
  process.stdout.write(`## Index memory\n\n${markdownTable(['what', 'entries', 'bytes/entry', 'MB per million'], memory(Number(args.blocks)))}\n\n`);
  process.stdout.write(`## Prefix-heavy routing (8 pods, LRU 2,000 blocks each, 24 system prompts of 1,024 tokens)\n\n${markdownTable(['policy', 'requests', 'prefix-hit %', 'modelled prefill ms/request'], routing(Number(args.requests)))}\n`);
}

void main().then(() => process.exit(0), (err: unknown) => {
  process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
