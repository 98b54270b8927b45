import { z } from 'zod';
import { definePlugin, type CycleContext, type Scorer } from '../../framework/plugin';
import { combine32 } from '../../hashing/fast-hash';
import type { Candidates } from '../../framework/candidates';

export const RANDOM = 'random';

export const RandomParamsSchema = z.object({}).strict();

/**
 * A pseudo-random score 0..100 per endpoint, like Kthena's `rand.Intn(101)` but drawn from the request id and the
 * endpoint key, so the same request gets the same answer (replayable) while different requests spread. Unlike
 * Kthena it may be combined with other scorers (a small weight adds exploration noise).
 */
export class RandomScorer implements Scorer {
  readonly type = RANDOM;
  readonly name: string;

  constructor(name: string) {
    this.name = name;
  }

  score(ctx: CycleContext, c: Candidates, out: Float64Array): void {
    // A different stream from the tie-break's (which uses the bare seed).
    const seed = ctx.seed ^ 0x5bd1e995;
    const keyHash = c.keyHash;
    for (let i = 0; i < c.size; i++) out[i] = combine32(seed, keyHash[i]) % 101;
  }
}

export const randomPlugin = definePlugin({
  type: RANDOM,
  kinds: ['scorer'],
  description: 'Pseudo-random 0..100 per endpoint, seeded by the request id (deterministic per request).',
  params: RandomParamsSchema,
  create: (name) => new RandomScorer(name),
});
