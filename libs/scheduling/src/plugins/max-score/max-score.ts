import { z } from 'zod';
import { definePlugin, type CycleContext, type PickInput, type PickResult, type Picker } from '../../framework/plugin';
import { byFinalScore, selectTop, type RankOrder } from '../../framework/ranking';

export const MAX_SCORE = 'max-score';

export const MaxScoreParamsSchema = z.object({}).strict();

/**
 * Highest final score first; equal scores are ordered by a hash of the request id and endpoint key (replayable,
 * yet spread across requests). When placing several media items of one request, endpoints with fewer items
 * already placed come first, so the items spread before they stack.
 */
export class MaxScorePicker implements Picker {
  readonly type = MAX_SCORE;
  readonly name: string;

  constructor(name: string) {
    this.name = name;
  }

  pick(ctx: CycleContext, input: PickInput): PickResult {
    const rank = byFinalScore(input.candidates, input.finals, ctx.seed);
    const pending = input.pending;
    const order: RankOrder = pending ? (a, b) => (pending[a] !== pending[b] ? pending[a] < pending[b] : rank(a, b)) : rank;
    return { order: selectTop(input.candidates.size, input.count, order, pending ? undefined : input.finals) };
  }
}

export const maxScorePlugin = definePlugin({
  type: MAX_SCORE,
  kinds: ['picker'],
  description: 'Orders by final score, ties broken by a seeded hash of the request id (the default picker).',
  params: MaxScoreParamsSchema,
  create: (name) => new MaxScorePicker(name),
});
