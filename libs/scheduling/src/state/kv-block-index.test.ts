import { KvBlockIndex } from './kv-block-index';

const keys = (prefix: string, n: number): string[] => Array.from({ length: n }, (_, i) => `${prefix}${i.toString(16).padStart(15, '0')}`);

function matches(index: KvBlockIndex, k: readonly string[]): Record<string, number> {
  const out: Record<string, number> = {};
  index.prefixMatches(k, (pod, blocks) => (out[pod] = blocks));
  return out;
}

describe('KvBlockIndex', () => {
  it('matches the longest prefix one source of a live pod holds, best over its DP ranks', () => {
    const index = new KvBlockIndex();
    const k = keys('a', 6);
    index.store('ns/p', 'ns/p', k.slice(0, 2));
    index.store('ns/p#1', 'ns/p', k.slice(0, 4));
    index.store('ns/q', 'ns/q', [k[0], k[2], k[3]]);
    // Not live yet: blocks arriving before the source's state do not score its pod.
    expect(matches(index, k)).toEqual({});
    index.setLive('ns/p', 'ns/p', true);
    index.setLive('ns/p#1', 'ns/p', true);
    index.setLive('ns/q', 'ns/q', true);
    expect(matches(index, k)).toEqual({ 'ns/p': 4, 'ns/q': 1 });
    expect(index.podIsLive('ns/p')).toBe(true);
    index.remove('ns/p#1', [k[1]]);
    expect(matches(index, k)).toEqual({ 'ns/p': 2, 'ns/q': 1 });
    index.clear('ns/p');
    expect(matches(index, k)).toEqual({ 'ns/p': 1, 'ns/q': 1 });
    index.setLive('ns/q', 'ns/q', false);
    expect(index.podIsLive('ns/q')).toBe(false);
    expect(matches(index, k)).toEqual({ 'ns/p': 1 });
  });

  it('stays within maxEntries, taking the least recently stored blocks of the largest source', () => {
    const index = new KvBlockIndex({ maxEntries: 100 });
    index.setLive('ns/big', 'ns/big', true);
    index.setLive('ns/small', 'ns/small', true);
    const small = keys('b', 10);
    index.store('ns/small', 'ns/small', small);
    const big = keys('c', 95);
    index.store('ns/big', 'ns/big', big);
    const stats = index.stats();
    expect(stats.entries).toBeLessThanOrEqual(100);
    expect(stats.evicted).toBeGreaterThan(0);
    // The small source is untouched; the big one lost its oldest blocks, so only its recent tail still matches.
    expect(index.blocksOf('ns/small')).toEqual(small);
    expect(index.blockCount('ns/small')).toBe(small.length);
    expect(index.blockCount('ns/absent')).toBe(0);
    expect(index.blocksOf('ns/big')).toEqual(big.slice(big.length - index.blocksOf('ns/big').length));
    expect(matches(index, big)).toEqual({});
    // A re-stored block counts once and moves to the recent end.
    const before = index.stats().entries;
    index.store('ns/small', 'ns/small', [small[0]]);
    expect(index.stats().entries).toBe(before);
    expect(index.blocksOf('ns/small').at(-1)).toBe(small[0]);
  });

  it('forgets a dropped source and its pod', () => {
    const index = new KvBlockIndex();
    const k = keys('d', 3);
    index.store('ns/p', 'ns/p', k);
    index.setLive('ns/p', 'ns/p', true);
    index.dropSource('ns/p');
    expect(index.podIsLive('ns/p')).toBe(false);
    expect(matches(index, k)).toEqual({});
    expect(index.stats()).toMatchObject({ sources: 0, entries: 0, blocks: 0 });
  });
});
