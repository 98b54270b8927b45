import { z } from 'zod';
import { definePlugin, type CycleContext, type Scorer } from '../../framework/plugin';
import type { Candidates } from '../../framework/candidates';
import { LatencyNormalizationSchema, scoreLatencies, type LatencyNormalization } from '../least-latency/least-latency';

export const OBSERVED_LATENCY = 'observed-latency';

export const ObservedLatencyParamsSchema = z
  .object({
    /** α in `α·sTTFT + (1−α)·sTPOT`, as for least-latency. */
    TTFTTPOTWeightFactor: z.number().min(0).max(1).default(0.5),
    /** Observations fade towards the neutral 50 as they age and are forgotten after this long (idle pods are probed). */
    maxLatencyAgeMs: z.number().int().min(1).default(30_000),
    /** As for least-latency: `min-max` (default) or `relative` to the fastest. */
    normalization: LatencyNormalizationSchema.default('min-max'),
  })
  .strict();
export type ObservedLatencyParams = z.infer<typeof ObservedLatencyParamsSchema>;

/**
 * least-latency's formula over the TTFT and TPOT the gateways measured per endpoint (dispatch finish events,
 * moving averages) instead of the pod-watcher's scraped interval means: every leg updates them as it ends, on every
 * replica, with no scrape interval in between. Ageing is the same: a figure fades to neutral over
 * `maxLatencyAgeMs` and an idle endpoint whose figure aged out is probed (100). A prefill pod has no TPOT: its
 * TTFT alone ranks it.
 */
export class ObservedLatencyScorer implements Scorer {
  readonly type = OBSERVED_LATENCY;
  readonly name: string;
  readonly #alpha: number;
  readonly #maxAgeMs: number;
  readonly #normalization: LatencyNormalization;
  #ttft = new Float64Array(16);
  #tpot = new Float64Array(16);
  #at = new Float64Array(16);
  #weights = new Float64Array(16);

  constructor(name: string, params: ObservedLatencyParams) {
    this.name = name;
    this.#alpha = params.TTFTTPOTWeightFactor;
    this.#maxAgeMs = params.maxLatencyAgeMs;
    this.#normalization = params.normalization;
  }

  score(ctx: CycleContext, c: Candidates, out: Float64Array): void {
    const n = c.size;
    if (this.#ttft.length < n) {
      const size = Math.max(n, this.#ttft.length * 2);
      this.#ttft = new Float64Array(size);
      this.#tpot = new Float64Array(size);
      this.#at = new Float64Array(size);
      this.#weights = new Float64Array(size);
    }
    const store = c.observed;
    for (let i = 0; i < n; i++) {
      const o = store.get(c.endpoint(i).key);
      this.#ttft[i] = o?.ttftMs ?? 0;
      // No TPOT (a prefill pod, or only non-streamed answers): a constant, so TTFT alone tells the pods apart.
      this.#tpot[i] = o === undefined ? 0 : o.tpotMs > 0 ? o.tpotMs : 1;
      this.#at[i] = o?.at ?? 0;
    }
    scoreLatencies(
      { now: ctx.now, n, ttft: this.#ttft, tpot: this.#tpot, at: this.#at, load: c },
      this.#alpha,
      this.#maxAgeMs,
      this.#weights,
      out,
      this.#normalization,
    );
  }
}

export const observedLatencyPlugin = definePlugin({
  type: OBSERVED_LATENCY,
  kinds: ['scorer'],
  description: 'Scores by the TTFT and TPOT the gateways measured per endpoint (least-latency formula, fading with age).',
  params: ObservedLatencyParamsSchema,
  create: (name, params) => new ObservedLatencyScorer(name, params),
});
