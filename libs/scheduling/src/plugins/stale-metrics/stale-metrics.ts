import { z } from 'zod';
import { definePlugin, type CycleContext, type Filter } from '../../framework/plugin';
import type { Candidates } from '../../framework/candidates';

export const STALE_METRICS = 'stale-metrics';

export const StaleMetricsParamsSchema = z
  .object({
    /** Metrics older than this (ms since the last successful scrape) count as stale. */
    maxAgeMs: z.number().int().min(1).default(10_000),
  })
  .strict();
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

  filter(ctx: CycleContext, c: Candidates, keep: Uint8Array): void {
    const oldest = ctx.now - this.#maxAgeMs;
    const stale = c.stale;
    const scrapedAt = c.scrapedAt;
    const n = c.size;
    let kept = 0;
    for (let i = 0; i < n; i++) {
      const at = scrapedAt[i];
      if (stale[i] === 1 || !(at > 0) || at < oldest) keep[i] = 0;
      else kept++;
    }
    if (kept === 0) for (let i = 0; i < n; i++) keep[i] = 1;
  }
}

export const staleMetricsPlugin = definePlugin({
  type: STALE_METRICS,
  kinds: ['filter'],
  description: 'Drops endpoints with stale or missing metrics, unless that would drop them all.',
  params: StaleMetricsParamsSchema,
  create: (name, params) => new StaleMetricsFilter(name, params),
});
