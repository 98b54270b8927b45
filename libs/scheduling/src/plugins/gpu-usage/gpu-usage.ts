import { z } from 'zod';
import { definePlugin, type CycleContext, type Scorer } from '../../framework/plugin';
import type { Candidates } from '../../framework/candidates';

export const GPU_USAGE = 'gpu-usage';

export const GpuUsageParamsSchema = z.object({}).strict();

/** Kthena's gpu-usage: `trunc((1 − kvCacheUsage)·100)`, so emptier KV caches score higher. */
export class GpuUsageScorer implements Scorer {
  readonly type = GPU_USAGE;
  readonly name: string;

  constructor(name: string) {
    this.name = name;
  }

  score(_ctx: CycleContext, c: Candidates, out: Float64Array): void {
    const kv = c.kvCacheUsage;
    for (let i = 0; i < c.size; i++) out[i] = Math.trunc((1 - kv[i]) * 100);
  }
}

export const gpuUsagePlugin = definePlugin({
  type: GPU_USAGE,
  kinds: ['scorer'],
  description: 'Scores by free KV cache: trunc((1 − usage)·100).',
  params: GpuUsageParamsSchema,
  create: (name) => new GpuUsageScorer(name),
});
