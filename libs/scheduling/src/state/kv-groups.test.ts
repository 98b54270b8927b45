import { KvBlockIndex } from './kv-block-index';
import { groupBlockKey, hybridPrefixBlocks, isPlainSource, type KvGroup } from './kv-groups';

// Fine keys k0..k11 chained at 16 tokens; group blocks name the last fine key inside them.
const keys = Array.from({ length: 12 }, (_, i) => i.toString(16).padStart(16, '0'));
const holder = (held: string[]) => (key: string) => held.includes(key);
const full32: KvGroup = { idx: 0, blockSize: 32, kind: 'full_attention' };
const swa16: KvGroup = { idx: 1, blockSize: 16, kind: 'sliding_window', slidingWindow: 48 };
const g1 = (i: number): string => groupBlockKey(keys[i], 1);

describe('hybrid KV-cache groups', () => {
  it('a full-attention group of larger blocks matches by the last fine hash inside each block', () => {
    const held = [keys[1], keys[3], keys[5]] as string[];
    expect(hybridPrefixBlocks([full32], keys, 16, holder(held))).toBe(6);
    // A missing middle block ends the prefix.
    expect(hybridPrefixBlocks([full32], keys, 16, holder([keys[1], keys[5]] as string[]))).toBe(2);
  });

  it('a sliding window needs only the blocks its window reaches before the end of the hit', () => {
    // Window 48 → ceil(47/16) = 3 blocks. Group 0 holds 8 fine blocks' worth (4×32); group 1 holds blocks 5..7.
    const held = [keys[1], keys[3], keys[5], keys[7], g1(5), g1(6), g1(7)];
    expect(hybridPrefixBlocks([full32, swa16], keys, 16, holder(held))).toBe(8);
    // Block 6 of the window evicted: no run of 3 ends within the prefix, and none starts at block 0.
    expect(hybridPrefixBlocks([full32, swa16], keys, 16, holder(held.filter((k) => k !== g1(6))))).toBe(0);
    // A run reaching block 0 counts even when shorter than the window.
    expect(hybridPrefixBlocks([full32, swa16], keys, 16, holder([keys[1], g1(0), g1(1)]))).toBe(2);
  });

  it('the groups agree on the longest length all of them hold', () => {
    // The window's run ends at 5 fine blocks; the full group cuts that to its 32-token boundary (4), where the
    // window (blocks 1..3) still holds.
    const held = [keys[1], keys[3], keys[5], keys[7], g1(1), g1(2), g1(3), g1(4)];
    expect(hybridPrefixBlocks([full32, swa16], keys, 16, holder(held))).toBe(4);
  });

  it('a Mamba group needs the state block at the end; other block sizes must be multiples', () => {
    const mamba: KvGroup = { idx: 1, blockSize: 32, kind: 'mamba' };
    expect(hybridPrefixBlocks([full32, mamba], keys, 16, holder([keys[1], keys[3], keys[5], g1(3)]))).toBe(4);
    expect(hybridPrefixBlocks([{ idx: 0, blockSize: 24 }], keys, 16, holder(keys))).toBe(0);
  });

  it('only sources of one full-attention group at the request block size take the plain walk', () => {
    expect(isPlainSource(undefined, 16)).toBe(true);
    expect(isPlainSource([{ idx: 0, blockSize: 16 }], 16)).toBe(true);
    expect(isPlainSource([{ idx: 0, blockSize: 32 }], 16)).toBe(false);
    expect(isPlainSource([full32, swa16], 32)).toBe(false);
  });

  it('the index keeps a removal in one group from deleting the same hash of another group', () => {
    const index = new KvBlockIndex();
    index.setLive('s', 'ns/p', true);
    index.setGroups('s', 'ns/p', [
      { idx: 0, blockSize: 16 },
      { idx: 1, blockSize: 16, kind: 'sliding_window', slidingWindow: 32 },
    ]);
    index.store('s', 'ns/p', [...keys.slice(0, 4), ...keys.slice(0, 4).map((k) => groupBlockKey(k, 1))]);
    index.remove('s', [groupBlockKey(keys[0], 1), groupBlockKey(keys[1], 1)]);
    const hits: number[] = [];
    index.prefixMatches(keys.slice(0, 4), (_pod, blocks) => hits.push(blocks), 16);
    expect(hits).toEqual([4]);
  });
});
