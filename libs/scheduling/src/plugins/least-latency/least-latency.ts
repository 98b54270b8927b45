import { z } from 'zod';
import { definePlugin, type CycleContext, type Scorer } from '../../framework/plugin';
import type { Candidates } from '../../framework/candidates';

export const LEAST_LATENCY = 'least-latency';

/** Score of an endpoint with no TTFT or TPOT data yet: neutral, so new pods are neither shunned nor flooded. */
export const NO_LATENCY_DATA_SCORE = 50;

export const LeastLatencyParamsSchema = z.object({
  /** α in `α·sTTFT + (1−α)·sTPOT`; zod rejects NaN and ±Infinity, the range check rejects the rest. */
  TTFTTPOTWeightFactor: z.number().min(0).max(1).default(0.5),
}).strict();
export type LeastLatencyParams = z.infer<typeof LeastLatencyParamsSchema>;

/**
 * Kthena's least-latency: min-max normalise TTFT and TPOT over the endpoints that have data,
 * `s = 100·(max − x)/(max − min)` (100 when max = min), then `α·sTTFT + (1−α)·sTPOT`. Endpoints without data get 50.
 */
export class LeastLatencyScorer implements Scorer {
  readonly type = LEAST_LATENCY;
  readonly name: string;
  readonly #alpha: number;

  constructor(name: string, params: LeastLatencyParams) {
    this.name = name;
    this.#alpha = params.TTFTTPOTWeightFactor;
  }

  score(_ctx: CycleContext, c: Candidates, out: Float64Array): void {
    const ttft = c.ttftMs;
    const tpot = c.tpotMs;
    const n = c.size;
    let minT = Infinity, maxT = -Infinity, minP = Infinity, maxP = -Infinity;
    for (let i = 0; i < n; i++) {
      const t = ttft[i] as number;
      const p = tpot[i] as number;
      if (!(t > 0 && p > 0)) continue;
      if (t < minT) minT = t;
      if (t > maxT) maxT = t;
      if (p < minP) minP = p;
      if (p > maxP) maxP = p;
    }
    const a = this.#alpha;
    for (let i = 0; i < n; i++) {
      const t = ttft[i] as number;
      const p = tpot[i] as number;
      if (!(t > 0 && p > 0)) {
        out[i] = NO_LATENCY_DATA_SCORE;
        continue;
      }
      const sT = maxT === minT ? 100 : (100 * (maxT - t)) / (maxT - minT);
      const sP = maxP === minP ? 100 : (100 * (maxP - p)) / (maxP - minP);
      out[i] = a * sT + (1 - a) * sP;
    }
  }
}

export const leastLatencyPlugin = definePlugin({
  type: LEAST_LATENCY,
  kinds: ['scorer'],
  description: 'Scores by recent TTFT and TPOT, min-max normalised (Kthena formula); no data scores 50.',
  params: LeastLatencyParamsSchema,
  create: (name, params) => new LeastLatencyScorer(name, params),
});
