import { combine32 } from '../hashing/fast-hash';
import type { Endpoint } from '../state/endpoint';

/** A strict "ranks before" relation over candidate indices. */
export type RankOrder = (a: number, b: number) => boolean;

/** The tie-break between two endpoints: smaller seeded hash of the key, then the smaller key (a total order). */
export function tieBefore(ea: Endpoint, eb: Endpoint, seed: number): boolean {
  const ta = combine32(seed, ea.keyHash);
  const tb = combine32(seed, eb.keyHash);
  if (ta !== tb) return ta < tb;
  return ea.key < eb.key;
}

/**
 * Rank by final score (higher first), then by the seeded tie-break. The result never depends on list order, and
 * the seed (from the request id) makes equal endpoints take turns across requests while a request repeats exactly.
 */
export function byFinalScore(candidates: readonly Endpoint[], finals: Float64Array, seed: number): RankOrder {
  return (a, b) => {
    const fa = finals[a] as number;
    const fb = finals[b] as number;
    if (fa !== fb) return fa > fb;
    return tieBefore(candidates[a] as Endpoint, candidates[b] as Endpoint, seed);
  };
}

/**
 * The first `count` of `n` candidate indices under `before`, in order, by partial selection (O(n·count), no full
 * sort): most candidates are rejected by one comparison with the current last.
 */
export function selectTop(n: number, count: number, before: RankOrder): number[] {
  const k = Math.min(count, n);
  const top: number[] = [];
  if (k <= 0) return top;
  for (let i = 0; i < n; i++) {
    if (top.length === k) {
      if (!before(i, top[k - 1] as number)) continue;
      top.pop();
    }
    let j = top.length;
    top.push(i);
    while (j > 0 && before(i, top[j - 1] as number)) {
      top[j] = top[j - 1] as number;
      j--;
    }
    top[j] = i;
  }
  return top;
}
