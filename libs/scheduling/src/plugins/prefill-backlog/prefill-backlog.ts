import { z } from 'zod';
import { definePlugin, type CycleContext, type Scorer } from '../../framework/plugin';
import type { Candidates } from '../../framework/candidates';

export const PREFILL_BACKLOG = 'prefill-backlog';

export const PrefillBacklogParamsSchema = z
  .object({
    /** Prefill compute per 1,000 prompt tokens, ms (the engines' rate; engine-sim `realistic`: 50). */
    prefillMsPer1kTokens: z.number().min(0).default(50),
    /** Fixed cost of one prefill, ms. */
    prefillOverheadMs: z.number().min(0).default(2),
  })
  .strict();
export type PrefillBacklogParams = z.infer<typeof PrefillBacklogParamsSchema>;

/**
 * Prices the prefill work a pod still has ahead of it instead of counting requests: from every gateway's dispatch
 * events (start events carry the leg's prompt tokens), each open leg's prefill time minus the time since it started,
 * summed per candidate. `score = 100·(max − backlog)/max`; all 100 when no candidate has a backlog. A pod busy with
 * a 30k-token prompt thus loses its affinities' pull for the second or so that prompt takes, while a pod with many
 * short requests decoding is not penalised.
 */
export class PrefillBacklogScorer implements Scorer {
  readonly type = PREFILL_BACKLOG;
  readonly name: string;
  readonly #params: PrefillBacklogParams;
  #pending = new Float64Array(16);

  constructor(name: string, params: PrefillBacklogParams) {
    this.name = name;
    this.#params = params;
  }

  score(ctx: CycleContext, c: Candidates, out: Float64Array): void {
    const n = c.size;
    if (this.#pending.length < n) this.#pending = new Float64Array(Math.max(n, this.#pending.length * 2));
    const p = this.#pending;
    let max = 0;
    for (let i = 0; i < n; i++) {
      const ms = c.backlog.pendingMs(c.endpoint(i).key, ctx.now, this.#params.prefillMsPer1kTokens, this.#params.prefillOverheadMs);
      p[i] = ms;
      if (ms > max) max = ms;
    }
    for (let i = 0; i < n; i++) out[i] = max === 0 ? 100 : (100 * (max - p[i])) / max;
  }
}

export const prefillBacklogPlugin = definePlugin({
  type: PREFILL_BACKLOG,
  kinds: ['scorer'],
  description: 'Scores by the prefill time still ahead of a pod (prompt tokens of its open legs, from dispatch events).',
  params: PrefillBacklogParamsSchema,
  create: (name, params) => new PrefillBacklogScorer(name, params),
});
