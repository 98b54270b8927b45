import type { Candidates } from '../framework/candidates';

/**
 * Bounded load for affinity scorers: candidate i may take one more request while its in-flight count stays within
 * `ceil(loadFactor · (total in flight + 1) / candidates)`. Affinity then never piles a hot key, tenant or session
 * onto one pod: past the cap the request falls back to the other scorers.
 */
export function withinLoadBound(c: Candidates, loadFactor: number): (i: number) => boolean {
  const inflight = c.inflight();
  const n = c.size;
  let total = 1;
  for (let i = 0; i < n; i++) total += inflight[i] as number;
  const cap = Math.ceil((loadFactor * total) / n);
  return (i) => (inflight[i] as number) + 1 <= cap;
}
