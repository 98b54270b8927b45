import type { Candidates } from '../framework/candidates';

/** Default `loadSlack` of the affinity scorers: in-flight requests a pod may run above the relative bound. */
export const DEFAULT_LOAD_SLACK = 4;

/**
 * Bounded load for affinity scorers: candidate i may take one more request while its in-flight count stays within
 * `ceil(loadFactor · (total in flight + 1) / candidates) + slack`. Affinity then never piles a hot key, tenant or
 * session onto one pod: past the cap the request falls back to the other scorers.
 *
 * The slack is absolute: a relative bound alone is 1 or 2 requests whenever the pool is lightly loaded, and with
 * the in-flight counts of real traffic (bursty, and including the scheduler's own decisions not started yet) a pod
 * one or two requests above the mean would lose its affinity although an engine batching dozens of sequences
 * serves one more at almost no cost, while a cache miss costs a full prefill or encode. Routers that weigh cache
 * affinity against load use such an absolute floor too (SGLang's cache-aware router: `balance_abs_threshold`).
 */
export function withinLoadBound(c: Candidates, loadFactor: number, slack = 0): (i: number) => boolean {
  const inflight = c.inflight();
  const n = c.size;
  let total = 1;
  for (let i = 0; i < n; i++) total += inflight[i] as number;
  const cap = Math.ceil((loadFactor * total) / n) + slack;
  return (i) => (inflight[i] as number) + 1 <= cap;
}
