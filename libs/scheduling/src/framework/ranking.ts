import { combine32 } from '../hashing/fast-hash';
import type { Candidates } from './candidates';

/** A strict "ranks before" relation over candidate indices. */
export type RankOrder = (a: number, b: number) => boolean;

/**
 * The tie-break between candidates a and b: smaller seeded hash of the endpoint key, then the smaller key (a total
 * order, so the result never depends on list order; the seed makes equal endpoints take turns across requests).
 */
function tieBefore(c: Candidates, a: number, b: number, seed: number): boolean {
  const ta = combine32(seed, c.keyHash[a]);
  const tb = combine32(seed, c.keyHash[b]);
  if (ta !== tb) return ta < tb;
  return c.endpoint(a).key < c.endpoint(b).key;
}

/** Rank by final score (higher first), then by the seeded tie-break. */
export function byFinalScore(c: Candidates, finals: Float64Array, seed: number): RankOrder {
  return (a, b) => {
    const fa = finals[a];
    const fb = finals[b];
    if (fa !== fb) return fa > fb;
    return tieBefore(c, a, b, seed);
  };
}

/**
 * The first `count` of `n` candidate indices under `before`, in order, by partial selection (O(n·count), no full
 * sort): most candidates are rejected by one comparison with the current last. When `before` orders primarily by
 * `primary` (higher first), passing it lets most candidates be rejected by one number comparison.
 */
export function selectTop(n: number, count: number, before: RankOrder, primary?: Float64Array): number[] {
  const k = Math.min(count, n);
  const top: number[] = [];
  if (k <= 0) return top;
  for (let i = 0; i < n; i++) {
    if (top.length === k) {
      const last = top[k - 1];
      if (primary && primary[i] < primary[last]) continue;
      if (!before(i, last)) continue;
      top.pop();
    }
    let j = top.length;
    top.push(i);
    while (j > 0 && before(i, top[j - 1])) {
      top[j] = top[j - 1];
      j--;
    }
    top[j] = i;
  }
  return top;
}
