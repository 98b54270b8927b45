import { z } from 'zod';
import { definePlugin, type CycleContext, type Filter } from '../../framework/plugin';
import type { Candidates } from '../../framework/candidates';

export const LORA_AFFINITY = 'lora-affinity';

export const LoraAffinityParamsSchema = z.object({}).strict();

/**
 * Keeps endpoints whose engine lists the request's model in GET /v1/models. Keyed on `request.model`, which is the
 * upstream model (the ModelServer's model or the LoRA adapter), never the route's virtual name, so it cannot empty
 * the set the way Kthena's did. An endpoint that has not reported its models yet (empty list) is kept.
 */
export class LoraAffinityFilter implements Filter {
  readonly type = LORA_AFFINITY;
  readonly name: string;

  constructor(name: string) {
    this.name = name;
  }

  filter(ctx: CycleContext, c: Candidates, keep: Uint8Array): void {
    const model = ctx.request.model;
    for (let i = 0; i < c.size; i++) {
      const models = c.endpoint(i).record.models;
      if (models.length > 0 && !models.includes(model)) keep[i] = 0;
    }
  }
}

export const loraAffinityPlugin = definePlugin({
  type: LORA_AFFINITY,
  kinds: ['filter'],
  description: 'Keeps endpoints that serve the request model (base or LoRA adapter); unknown model lists pass.',
  params: LoraAffinityParamsSchema,
  create: (name) => new LoraAffinityFilter(name),
});
