import { z } from 'zod';
import { definePlugin, type CycleContext, type Scorer } from '../../framework/plugin';
import type { Candidates } from '../../framework/candidates';

export const LEAST_LATENCY = 'least-latency';

/** Score of an endpoint with no TTFT or TPOT data yet: neutral, so new pods are neither shunned nor flooded. */
export const NO_LATENCY_DATA_SCORE = 50;

/** Score of an idle endpoint whose latency has aged out: it gets one probe request to measure it again. */
export const PROBE_SCORE = 100;

/**
 * How measured latencies become scores. `min-max` (Kthena): `100·(max − x)/(max − min)`, so the fastest candidate
 * scores 100 and the slowest 0 however close they are — 5 % apart is a full 100-point swing, which outweighs any
 * cache affinity of weight 1 on noise. `relative`: `100·min/x`, the score falls in proportion to how much slower a
 * candidate is than the fastest (5 % slower scores 95, twice as slow 50).
 */
export const LatencyNormalizationSchema = z.enum(['min-max', 'relative']);
export type LatencyNormalization = z.infer<typeof LatencyNormalizationSchema>;

export const LeastLatencyParamsSchema = z
  .object({
    /** α in `α·sTTFT + (1−α)·sTPOT`; zod rejects NaN and ±Infinity, the range check rejects the rest. */
    TTFTTPOTWeightFactor: z.number().min(0).max(1).default(0.5),
    /**
     * Latency means fade towards the neutral 50 as they age (linearly, by the time since the engine last observed a
     * request) and are forgotten after this long: a slow burst must not keep an engine scored 0 once it has recovered.
     */
    maxLatencyAgeMs: z.number().int().min(1).default(30_000),
    /** `min-max` (Kthena's formula, the plugin's default) or `relative` (Triad's built-in config). */
    normalization: LatencyNormalizationSchema.default('min-max'),
  })
  .strict();
export type LeastLatencyParams = z.infer<typeof LeastLatencyParamsSchema>;

/**
 * Kthena's least-latency: min-max normalise TTFT and TPOT over the endpoints that have data,
 * `s = 100·(max − x)/(max − min)` (100 when max = min), then `α·sTTFT + (1−α)·sTPOT`. Endpoints without data get 50.
 *
 * Unlike Kthena, a mean ages: with `w = 1 − age/maxLatencyAgeMs` (age = now − latencyAt) the score is
 * `w·s + (1−w)·50`, and an endpoint whose mean is older than `maxLatencyAgeMs` is scored as if it had no data, or
 * probed (100) while nothing is in flight to it. An engine the scorer shunned after one slow burst receives no
 * requests, so its mean would never change; ageing brings it back and the probe measures it again.
 */
export class LeastLatencyScorer implements Scorer {
  readonly type = LEAST_LATENCY;
  readonly name: string;
  readonly #alpha: number;
  readonly #maxAgeMs: number;
  readonly #normalization: LatencyNormalization;
  #weights = new Float64Array(16);

  constructor(name: string, params: LeastLatencyParams) {
    this.name = name;
    this.#alpha = params.TTFTTPOTWeightFactor;
    this.#maxAgeMs = params.maxLatencyAgeMs;
    this.#normalization = params.normalization;
  }

  score(ctx: CycleContext, c: Candidates, out: Float64Array): void {
    if (this.#weights.length < c.size) this.#weights = new Float64Array(Math.max(c.size, this.#weights.length * 2));
    scoreLatencies(
      { now: ctx.now, n: c.size, ttft: c.ttftMs, tpot: c.tpotMs, at: c.latencyAt, load: c },
      this.#alpha,
      this.#maxAgeMs,
      this.#weights,
      out,
      this.#normalization,
    );
  }
}

/** Latency columns of the candidates of one run, whatever their source. */
export interface LatencyColumns {
  readonly now: number;
  readonly n: number;
  /** Means, ms; 0 = no data. */
  readonly ttft: Float64Array;
  readonly tpot: Float64Array;
  /** When each mean last took in an observation (ms since epoch). */
  readonly at: Float64Array;
  /**
   * In-flight counts of the candidates, read only when some mean has aged out (the candidates themselves, not a
   * closure: a function made per call is named at run time under esbuild's keepNames, one defineProperty each).
   */
  readonly load: { inflight(): Float64Array };
}

/**
 * Kthena's formula with ageing, shared by `least-latency` (the pod-watcher's scraped means) and `observed-latency`
 * (the gateways' measurements): see `LeastLatencyScorer`; `normalization` as `LatencyNormalizationSchema` says.
 * `w` is scratch space of at least `n` entries.
 */
export function scoreLatencies(
  c: LatencyColumns,
  a: number,
  maxAgeMs: number,
  w: Float64Array,
  out: Float64Array,
  normalization: LatencyNormalization = 'min-max',
): void {
  const { n, ttft, tpot, at } = c;
  let minT = Infinity,
    maxT = -Infinity,
    minP = Infinity,
    maxP = -Infinity;
  let aged = false;
  for (let i = 0; i < n; i++) {
    const t = ttft[i];
    const p = tpot[i];
    if (!(t > 0 && p > 0)) {
      w[i] = -1;
      continue;
    }
    const age = c.now - at[i];
    const weight = age <= 0 ? 1 : 1 - age / maxAgeMs;
    if (weight <= 0) {
      w[i] = 0;
      aged = true;
      continue;
    }
    w[i] = weight;
    if (t < minT) minT = t;
    if (t > maxT) maxT = t;
    if (p < minP) minP = p;
    if (p > maxP) maxP = p;
  }
  const inflight = aged ? c.load.inflight() : undefined;
  for (let i = 0; i < n; i++) {
    const weight = w[i];
    if (weight < 0) {
      out[i] = NO_LATENCY_DATA_SCORE;
      continue;
    }
    if (weight === 0) {
      out[i] = (inflight?.[i] as number) > 0 ? NO_LATENCY_DATA_SCORE : PROBE_SCORE;
      continue;
    }
    const t = ttft[i];
    const p = tpot[i];
    const relative = normalization === 'relative';
    const sT = relative ? (100 * minT) / t : maxT === minT ? 100 : (100 * (maxT - t)) / (maxT - minT);
    const sP = relative ? (100 * minP) / p : maxP === minP ? 100 : (100 * (maxP - p)) / (maxP - minP);
    out[i] = weight * (a * sT + (1 - a) * sP) + (1 - weight) * NO_LATENCY_DATA_SCORE;
  }
}

export const leastLatencyPlugin = definePlugin({
  type: LEAST_LATENCY,
  kinds: ['scorer'],
  description: 'Scores by recent TTFT and TPOT, min-max (Kthena formula) or relative to the fastest, fading with age; no data scores 50.',
  params: LeastLatencyParamsSchema,
  create: (name, params) => new LeastLatencyScorer(name, params),
});
