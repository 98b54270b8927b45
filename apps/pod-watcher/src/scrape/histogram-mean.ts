/** A histogram's `_sum` and `_count`, totalled over its series. */
export interface HistogramTotals {
  readonly sum: number;
  readonly count: number;
}

/**
 * Mean of the observations made since the previous scrape, in milliseconds (Kthena's method: Δsum / Δcount).
 * - No previous scrape, or the histogram is missing: nothing new is known, so the previous mean stays.
 * - No new observations (Δcount = 0): the previous mean stays, since an idle interval says nothing about latency.
 * - The totals went down (the engine restarted): the new process's totals are the interval.
 */
export function intervalMeanMs(
  prev: HistogramTotals | undefined,
  cur: HistogramTotals | undefined,
  previousMeanMs: number | undefined,
): number | undefined {
  if (!cur || !prev) return previousMeanMs;
  const reset = cur.count < prev.count || cur.sum < prev.sum;
  const dCount = reset ? cur.count : cur.count - prev.count;
  const dSum = reset ? cur.sum : cur.sum - prev.sum;
  if (dCount <= 0) return previousMeanMs;
  return Math.max(0, (dSum / dCount) * 1000);
}

/** True when the histogram counted observations since the previous scrape (also after an engine restart). */
export function hasNewObservations(prev: HistogramTotals | undefined, cur: HistogramTotals | undefined): boolean {
  if (!cur || !prev) return false;
  return cur.count < prev.count ? cur.count > 0 : cur.count > prev.count;
}
