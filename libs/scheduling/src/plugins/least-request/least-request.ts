import { z } from 'zod';
import { definePlugin, type CycleContext, type Filter, type Scorer } from '../../framework/plugin';
import type { Candidates } from '../../framework/candidates';

export const LEAST_REQUEST = 'least-request';

export const LeastRequestParamsSchema = z
  .object({
    /** Keep an endpoint only while the engine's waiting queue is shorter than this (Kthena default 10). */
    maxWaitingRequests: z.number().int().min(1).default(10),
  })
  .strict();
export type LeastRequestParams = z.infer<typeof LeastRequestParamsSchema>;

/**
 * Kthena's least-request. Filter: keep `waiting < maxWaitingRequests`. Score: `base = inflight +
 * 100·max(inflight − running, 0)`, `score = (maxBase − base)/maxBase·100`, or 100 for all when maxBase is 0.
 * `inflight` is what all gateways have dispatched and not finished (shared across scheduler replicas);
 * `inflight − running` estimates requests queued in front of the engine, which cost far more than running ones.
 */
export class LeastRequestPlugin implements Filter, Scorer {
  readonly type = LEAST_REQUEST;
  readonly name: string;
  readonly #maxWaiting: number;

  constructor(name: string, params: LeastRequestParams) {
    this.name = name;
    this.#maxWaiting = params.maxWaitingRequests;
  }

  filter(_ctx: CycleContext, c: Candidates, keep: Uint8Array): void {
    const max = this.#maxWaiting;
    const waiting = c.waiting;
    for (let i = 0; i < c.size; i++) if (!(waiting[i] < max)) keep[i] = 0;
  }

  score(_ctx: CycleContext, c: Candidates, out: Float64Array): void {
    const inflight = c.inflight();
    const running = c.running;
    const n = c.size;
    let maxBase = 0;
    for (let i = 0; i < n; i++) {
      const f = inflight[i];
      const base = f + 100 * Math.max(f - running[i], 0);
      out[i] = base;
      if (base > maxBase) maxBase = base;
    }
    for (let i = 0; i < n; i++) out[i] = maxBase === 0 ? 100 : ((maxBase - out[i]) / maxBase) * 100;
  }
}

export const leastRequestPlugin = definePlugin({
  type: LEAST_REQUEST,
  kinds: ['filter', 'scorer'],
  description: 'Filters endpoints with a long engine queue; scores by in-flight requests from all gateways (Kthena formula).',
  params: LeastRequestParamsSchema,
  create: (name, params) => new LeastRequestPlugin(name, params),
});
