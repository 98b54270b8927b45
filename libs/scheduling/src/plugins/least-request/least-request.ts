import { z } from 'zod';
import { definePlugin, type CycleContext, type Filter, type Scorer } from '../../framework/plugin';
import type { Candidates } from '../../framework/candidates';

export const LEAST_REQUEST = 'least-request';

export const LeastRequestParamsSchema = z
  .object({
    /** Keep an endpoint only while the engine's waiting queue is shorter than this (Kthena default 10). */
    maxWaitingRequests: z.number().int().min(1).default(10),
    /**
     * How many of a pod's in-flight requests count as queued (×100 in the score). `running` (Kthena): those beyond
     * the engine's running count at the last scrape. `peak-running` (Triad's built-in config): those beyond the most
     * it has been seen running, unless the last scrape showed a queue (then its running count is its capacity).
     */
    queueEstimate: z.enum(['running', 'peak-running']).default('running'),
  })
  .strict();
export type LeastRequestParams = z.infer<typeof LeastRequestParamsSchema>;

/**
 * Kthena's least-request. Filter: keep `waiting < maxWaitingRequests`. Score: `base = inflight +
 * 100·max(inflight − running, 0)`, `score = (maxBase − base)/maxBase·100`, or 100 for all when maxBase is 0.
 * `inflight` is what all gateways have dispatched and not finished (shared across scheduler replicas);
 * `inflight − running` estimates requests queued in front of the engine, which cost far more than running ones.
 *
 * That estimate mixes a live count with a scraped one: `running` is up to a scrape interval old, so every request
 * dispatched since the scrape counts as queued although an engine with free batch slots runs it at once. The pod
 * that just received requests — the one affinity prefers — then scores near 0 while the others score near 100.
 * With `queueEstimate: peak-running` the engine's batch capacity is taken as the most it has been seen running
 * (its `max_num_seqs` once it has been full), so only requests beyond that count as queued; when the last scrape
 * showed waiting requests, the engine was full (or out of KV) at its running count, which is then the capacity.
 */
export class LeastRequestPlugin implements Filter, Scorer {
  readonly type = LEAST_REQUEST;
  readonly name: string;
  readonly #maxWaiting: number;
  readonly #peak: boolean;

  constructor(name: string, params: LeastRequestParams) {
    this.name = name;
    this.#maxWaiting = params.maxWaitingRequests;
    this.#peak = params.queueEstimate === 'peak-running';
  }

  /** Requests the engine runs before it queues: its scraped running count, or (peak-running) the most seen. */
  #slots(c: Candidates, i: number): number {
    const running = c.running[i];
    if (!this.#peak || c.waiting[i] > 0) return running;
    return Math.max(running, c.endpoint(i).peakRunning);
  }

  filter(_ctx: CycleContext, c: Candidates, keep: Uint8Array): void {
    const max = this.#maxWaiting;
    const waiting = c.waiting;
    for (let i = 0; i < c.size; i++) if (!(waiting[i] < max)) keep[i] = 0;
  }

  score(_ctx: CycleContext, c: Candidates, out: Float64Array): void {
    const inflight = c.inflight();
    const n = c.size;
    let maxBase = 0;
    for (let i = 0; i < n; i++) {
      const f = inflight[i];
      const base = f + 100 * Math.max(f - this.#slots(c, i), 0);
      out[i] = base;
      if (base > maxBase) maxBase = base;
    }
    for (let i = 0; i < n; i++) out[i] = maxBase === 0 ? 100 : ((maxBase - out[i]) / maxBase) * 100;
  }
}

export const leastRequestPlugin = definePlugin({
  type: LEAST_REQUEST,
  kinds: ['filter', 'scorer'],
  description:
    'Filters endpoints with a long engine queue; scores by in-flight requests from all gateways (Kthena formula; queued = beyond the scraped or the peak running count).',
  params: LeastRequestParamsSchema,
  create: (name, params) => new LeastRequestPlugin(name, params),
});
