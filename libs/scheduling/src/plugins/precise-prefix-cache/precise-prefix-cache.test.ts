import { loadSchedulerConfig } from '../../config/load-config';
import { kvHashOptionsOf, prefixHashOptionsOf } from '../../config/prefix-hash-options';
import { KvBlockIndex } from '../../state/kv-block-index';
import { applyScorer, buildIndex, candidatesOf, keyOf, pluginContext, schedulingRequest } from '../../testing';
import { createInTreeRegistry } from '../in-tree';
import { PrecisePrefixCacheParamsSchema, PrecisePrefixCacheScorer, PRECISE_PREFIX_CACHE } from './precise-prefix-cache';

const k = (i: number): string => i.toString(16).padStart(16, '0');

function score(
  plugin: PrecisePrefixCacheScorer,
  req: { kvBlockHashes?: string[]; prefixHashes?: string[] },
  pods = ['a', 'b', 'c'],
): number[] {
  const c = candidatesOf(buildIndex(pods.map((pod) => ({ pod }))), pods);
  return applyScorer(plugin, pluginContext({ request: schedulingRequest({ model: 'm', ...req }) }), c);
}

describe('precise-prefix-cache', () => {
  it('scores pods with events by their longest held prefix in blocks, 0 when they hold none', () => {
    const index = new KvBlockIndex();
    const plugin = new PrecisePrefixCacheScorer('p', PRECISE_PREFIX_CACHE, PrecisePrefixCacheParamsSchema.parse({}), index);
    for (const pod of ['a', 'b']) index.setLive(`default/${pod}`, `default/${pod}`, true);
    index.store('default/a', 'default/a', [k(1), k(2), k(3), k(4)]);
    index.store('default/b', 'default/b', [k(1), k(3)]); // holds block 3 but not block 2: only the first counts
    expect(score(plugin, { kvBlockHashes: [k(1), k(2), k(3), k(4)] })).toEqual([100, 25, 0]);
  });

  it('falls back to the approximate scorer for pods without live events, and for requests without block keys', () => {
    const index = new KvBlockIndex();
    const plugin = new PrecisePrefixCacheScorer('p', PRECISE_PREFIX_CACHE, PrecisePrefixCacheParamsSchema.parse({}), index);
    index.setLive('default/a', 'default/a', true);
    index.store('default/a', 'default/a', [k(1)]);
    index.store('default/c', 'default/c', [k(1), k(2)]); // c's source is down: its blocks do not count
    plugin.fallback.store.insert('m', ['h1', 'h2'], keyOf('c'));
    plugin.fallback.store.insert('m', ['h1', 'h2'], keyOf('a'));
    expect(score(plugin, { kvBlockHashes: [k(1), k(2)], prefixHashes: ['h1', 'h2'] })).toEqual([50, 0, 100]);
    expect(score(plugin, { prefixHashes: ['h1', 'h2'] })).toEqual([100, 0, 100]);
  });

  it("takes the best of a pod's data-parallel ranks", () => {
    const index = new KvBlockIndex();
    const plugin = new PrecisePrefixCacheScorer('p', PRECISE_PREFIX_CACHE, PrecisePrefixCacheParamsSchema.parse({}), index);
    index.setLive('default/a', 'default/a', true);
    index.setLive('default/a#1', 'default/a', true);
    index.store('default/a', 'default/a', [k(1)]);
    index.store('default/a#1', 'default/a', [k(1), k(2)]);
    expect(score(plugin, { kvBlockHashes: [k(1), k(2)] }, ['a'])).toEqual([100]);
  });

  it("accepts Kthena's kvcache-aware name and arguments, and tells the gateway to tokenize with the engines on their ports", () => {
    const result = loadSchedulerConfig(
      {
        plugins: [
          {
            type: 'kvcache-aware',
            args: { blockSizeToHash: 32, maxBlocksToMatch: 64, vllmTokenizerPort: 8000, sglangTokenizerPort: 30000 },
          },
        ],
        profiles: { aggregated: { scorers: [{ plugin: 'kvcache-aware', weight: 1 }] } },
      },
      { registry: createInTreeRegistry() },
    );
    if (!result.ok) throw new Error(result.reasons.join('; '));
    expect(kvHashOptionsOf(result.loaded)).toEqual({
      blockSize: 32,
      maxBlocksToMatch: 64,
      hashAlgo: 'sha256',
      hashSeed: '0',
      tokenizers: [],
      engineTokenization: { timeoutMs: 250, maxInFlight: 64, cacheEntries: 4096 },
      vllmTokenizerPort: 8000,
      sglangTokenizerPort: 30000,
      engineByDefault: true,
    });
    expect(prefixHashOptionsOf(result.loaded)).toEqual({ blockSize: 64, maxBlocks: 128 });
  });
});

describe('KvBlockIndex', () => {
  it('caps its entries by evicting the least recently stored blocks of the largest source', () => {
    const index = new KvBlockIndex({ maxEntries: 10 });
    index.setLive('s1', 'p1', true);
    index.store(
      's1',
      'p1',
      Array.from({ length: 8 }, (_, i) => k(i)),
    );
    index.store('s2', 'p2', [k(100), k(101), k(102), k(103)]);
    const stats = index.stats();
    expect(stats.entries).toBeLessThanOrEqual(10);
    expect(stats.evicted).toBeGreaterThan(0);
    expect(index.blocksOf('s1')[0]).not.toBe(k(0));
    expect(index.blocksOf('s2')).toHaveLength(4);
  });

  it("forgets a cleared source's blocks and a dropped source entirely", () => {
    const index = new KvBlockIndex();
    index.setLive('s', 'p', true);
    index.store('s', 'p', [k(1)]);
    index.clear('s');
    expect(index.stats().blocks).toBe(0);
    expect(index.podIsLive('p')).toBe(true);
    index.dropSource('s');
    expect(index.podIsLive('p')).toBe(false);
  });
});
