import type { Candidates } from '../framework/candidates';

/** Default `loadFloor` of the affinity scorers: in-flight requests a pod may always run and keep its affinity. */
export const DEFAULT_LOAD_FLOOR = 4;

/**
 * Bounded load for affinity scorers: candidate i may take one more request while its in-flight count stays within
 * `max(ceil(loadFactor · (total in flight + 1) / candidates), floor)`. Affinity then never piles a hot key, tenant or
 * session onto one pod: past the cap the request falls back to the other scorers.
 *
 * The floor is absolute: the relative cap alone is 1 or 2 requests whenever the pool is lightly loaded, and with the
 * in-flight counts of real traffic (bursty, and including the scheduler's own decisions not started yet) a pod one
 * request above an idle pool would lose its affinity although an engine batching dozens of sequences serves one more
 * at almost no cost, while a cache miss costs a full prefill or encode. Under load the relative cap is above the
 * floor and alone decides. (Routers that weigh cache affinity against load use an absolute threshold too: SGLang's
 * cache-aware router balances only past `balance_abs_threshold`.)
 *
 * With `batchRoom`, a pod past the cap keeps its affinity too while one more request joins its running batch
 * (`hasBatchRoom`): at 70 % load the pods run ~10 of 16 sequences each, the relative cap (1.1 × the mean) was
 * crossed by ordinary Poisson swings, and each crossing sent a request away from the pod holding its image or prefix
 * although that pod would have started it at once.
 */
export function withinLoadBound(c: Candidates, loadFactor: number, floor = 0, batchRoom = false): (i: number) => boolean {
  const inflight = c.inflight();
  const n = c.size;
  let total = 1;
  for (let i = 0; i < n; i++) total += inflight[i];
  const cap = Math.max(Math.ceil((loadFactor * total) / n), floor);
  if (!batchRoom) return (i) => inflight[i] + 1 <= cap;
  return (i) => inflight[i] + 1 <= cap || hasBatchRoom(c, i, inflight[i]);
}

/**
 * Whether one more request still joins candidate i's running batch: its engine reported nothing waiting at the
 * last scrape, and its in-flight count plus this request stays within the most it has been seen running (a lower
 * bound of `max_num_seqs`). Such a request starts at once; moving it elsewhere to balance counts only turns a cache
 * hit into a miss.
 */
export function hasBatchRoom(c: Candidates, i: number, inflight: number): boolean {
  return c.waiting[i] === 0 && inflight + 1 <= c.endpoint(i).peakRunning;
}
