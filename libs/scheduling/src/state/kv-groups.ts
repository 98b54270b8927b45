/**
 * KV-cache groups of hybrid models (sliding-window or Mamba layers beside full attention; Gemma-, gpt-oss-,
 * Qwen3-Next-, DeepSeek-V4-class models), as vLLM keeps them (vllm/v1/core/kv_cache_utils.py,
 * single_type_kv_cache_manager.py, kv_cache_coordinator.py):
 * - a request's block hashes are chained at `hash_block_size` (the gcd of the groups' block sizes, or
 *   `prefix_match_unit`);
 * - a group whose block is m times larger names its block j by hash (j+1)·m−1 of that chain (the last one inside
 *   the block, which already covers the whole prefix: `BlockHashListWithBlockSize`); its BlockStored and
 *   BlockRemoved events carry that hash, the group's block size and `group_idx`;
 * - a cache hit must hold in every group: full attention needs every block of the prefix, a sliding window only
 *   the blocks its window reaches back over before the hit's end, Mamba only the state block at the end; vLLM takes
 *   the longest length all groups agree on.
 */
export interface KvGroup {
  readonly idx: number;
  readonly blockSize: number;
  readonly kind?: string | undefined;
  readonly slidingWindow?: number | undefined;
}

/** The key a group gives a block (block keys of group 0 carry no suffix; see libs/kv-events `groupKey`). */
export function groupBlockKey(key: string, group: number): string {
  return group === 0 ? key : `${key}~${group}`;
}

/** A source whose one group uses the request's block size and full attention: matched by the plain prefix walk. */
export function isPlainSource(groups: readonly KvGroup[] | undefined, blockSize: number | undefined): boolean {
  if (groups === undefined) return true;
  if (groups.length !== 1) return false;
  const g = groups[0];
  return g.idx === 0 && (blockSize === undefined || g.blockSize === blockSize) && (g.kind === undefined || g.kind === 'full_attention');
}

/** Blocks of one group held for a hit of at most `maxBlocks` of its blocks, by the rule of the group's kind. */
function groupHit(g: KvGroup, maxBlocks: number, held: (j: number) => boolean): number {
  if (g.kind === 'sliding_window' && g.slidingWindow !== undefined) {
    // SlidingWindowManager: from the right, the first run of blocks covering the window (minus the token itself);
    // a run that reaches block 0 counts even when shorter.
    const needed = Math.ceil((g.slidingWindow - 1) / g.blockSize);
    let run = 0;
    for (let j = maxBlocks - 1; j >= 0; j--) {
      if (!held(j)) {
        run = 0;
        continue;
      }
      run++;
      if (run >= needed) return j + run;
    }
    return run;
  }
  if (g.kind === 'mamba') {
    // MambaManager: the state at the end of the hit, i.e. the last block held.
    for (let j = maxBlocks - 1; j >= 0; j--) if (held(j)) return j + 1;
    return 0;
  }
  let j = 0;
  while (j < maxBlocks && held(j)) j++;
  return j;
}

/**
 * The longest prefix (in blocks of `blockSize`, the hash block size of `keys`) that every group of a source holds:
 * each group finds its hit within the current bound, and the bound shrinks until all agree (then it is a multiple of
 * every group's block size). A group whose block size is not a multiple of `blockSize` matches nothing.
 */
export function hybridPrefixBlocks(
  groups: readonly KvGroup[],
  keys: readonly string[],
  blockSize: number,
  holds: (key: string) => boolean,
): number {
  let bound = keys.length * blockSize;
  for (let changed = true; changed && bound > 0;) {
    changed = false;
    for (const g of groups) {
      if (g.blockSize % blockSize !== 0) return 0;
      const scale = g.blockSize / blockSize;
      const held = (j: number): boolean => holds(groupBlockKey(keys[(j + 1) * scale - 1], g.idx));
      const tokens = groupHit(g, Math.floor(bound / g.blockSize), held) * g.blockSize;
      if (tokens < bound) {
        bound = tokens;
        changed = true;
      }
    }
  }
  return bound / blockSize;
}
