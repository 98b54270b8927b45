import { z } from 'zod';
import { definePlugin, type CycleContext, type Filter } from '../../framework/plugin';
import type { Candidates } from '../../framework/candidates';

export const KV_PRESSURE = 'kv-pressure';

export const KvPressureParamsSchema = z
  .object({
    /** Endpoints whose KV-cache usage (0..1) is above this are removed. */
    threshold: z.number().gt(0).max(1).default(0.9),
  })
  .strict();
export type KvPressureParams = z.infer<typeof KvPressureParamsSchema>;

/**
 * Removes endpoints whose KV cache is fuller than `threshold`: a new request there would evict other requests'
 * blocks or be preempted. If every endpoint is above, the request fails with this filter's name in the reason.
 */
export class KvPressureFilter implements Filter {
  readonly type = KV_PRESSURE;
  readonly name: string;
  readonly #threshold: number;

  constructor(name: string, params: KvPressureParams) {
    this.name = name;
    this.#threshold = params.threshold;
  }

  filter(_ctx: CycleContext, c: Candidates, keep: Uint8Array): void {
    const t = this.#threshold;
    const kv = c.kvCacheUsage;
    for (let i = 0; i < c.size; i++) if (!(kv[i] <= t)) keep[i] = 0;
  }
}

export const kvPressurePlugin = definePlugin({
  type: KV_PRESSURE,
  kinds: ['filter'],
  description: 'Drops endpoints whose KV-cache usage is above a threshold.',
  params: KvPressureParamsSchema,
  create: (name, params) => new KvPressureFilter(name, params),
});
