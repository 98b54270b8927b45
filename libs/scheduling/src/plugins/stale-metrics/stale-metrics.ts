import { z } from 'zod';
import { definePlugin, type CycleContext, type Filter } from '../../framework/plugin';
import { keepWhere } from '../../framework/keep-where';
import type { Endpoint } from '../../state/endpoint';

export const STALE_METRICS = 'stale-metrics';

export const StaleMetricsParamsSchema = z.object({
  /** Metrics older than this (ms since the last successful scrape) count as stale. */
  maxAgeMs: z.number().int().min(1).default(10_000),
}).strict();
export type StaleMetricsParams = z.infer<typeof StaleMetricsParamsSchema>;

/**
 * Removes endpoints whose metrics cannot be trusted (marked stale by the pod-watcher, never scraped, or older than
 * `maxAgeMs`), since every load scorer would be judging them on old numbers. When that would leave nothing, it
 * keeps them all: a pod with old metrics is better than no pod.
 */
export class StaleMetricsFilter implements Filter {
  readonly type = STALE_METRICS;
  readonly name: string;
  readonly #maxAgeMs: number;

  constructor(name: string, params: StaleMetricsParams) {
    this.name = name;
    this.#maxAgeMs = params.maxAgeMs;
  }

  filter(ctx: CycleContext, candidates: readonly Endpoint[]): readonly Endpoint[] {
    const oldest = ctx.now - this.#maxAgeMs;
    const fresh = keepWhere(candidates, (e) => !e.stale && e.scrapedAt > 0 && e.scrapedAt >= oldest);
    return fresh.length === 0 ? candidates : fresh;
  }
}

export const staleMetricsPlugin = definePlugin({
  type: STALE_METRICS,
  kinds: ['filter'],
  description: 'Drops endpoints with stale or missing metrics, unless that would drop them all.',
  params: StaleMetricsParamsSchema,
  create: (name, params) => new StaleMetricsFilter(name, params),
});
