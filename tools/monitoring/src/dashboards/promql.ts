/** PromQL shapes the dashboards repeat, over Grafana's `$__rate_interval` (at least four scrape intervals). */

const WINDOW = '$__rate_interval';

/** `sum by (labels) (rate(selector[window]))`; no labels: one series. */
export function rateSum(selector: string, by: readonly string[] = []): string {
  return `sum${by.length > 0 ? ` by (${by.join(', ')})` : ''} (rate(${selector}[${WINDOW}]))`;
}

/** The q-quantile of a histogram, per `by`, from its `_bucket` series matching `filter` (`{model="$model"}`). */
export function quantile(q: number, histogram: string, by: readonly string[], filter = ''): string {
  return `histogram_quantile(${q}, sum by (${['le', ...by].join(', ')}) (rate(${histogram}_bucket${filter}[${WINDOW}])))`;
}

/** Mean of a histogram per `by`: rate of `_sum` over rate of `_count`. */
export function mean(histogram: string, by: readonly string[], filter = ''): string {
  return `${rateSum(`${histogram}_sum${filter}`, by)} / ${rateSum(`${histogram}_count${filter}`, by)}`;
}

/**
 * The share of `all` that `part` is, per `by`. `part` may have no series yet (no errors so far): `or all * 0`
 * makes that a 0 rather than an empty panel.
 */
export function share(part: string, all: string, by: readonly string[]): string {
  return `(${rateSum(part, by)} or ${rateSum(all, by)} * 0) / ${rateSum(all, by)}`;
}
