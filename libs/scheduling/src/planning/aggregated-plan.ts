import type { Attempt } from '@triad/bus';
import type { LoadedProfile } from '../config/load-config';
import type { Endpoint, IndexedEndpoint } from '../state/endpoint';
import type { ModelServerPool } from '../state/model-server-pool';
import type { Cycle } from './cycle';
import type { ExplanationRecorder } from './explanation';
import { judgePick, type PickVerdict } from './pick-verdict';
import { runProfile, timedPick, type ProfileRun, type ProfileSlot, type Timing } from './profile-run';

export interface AggregatedPlanInput {
  readonly cycle: Cycle;
  readonly profile: LoadedProfile;
  readonly pool: ModelServerPool;
  readonly topN: number;
  readonly slot: ProfileSlot;
  readonly exclude: ReadonlySet<string> | undefined;
  readonly recorder: ExplanationRecorder | undefined;
  readonly timing: Timing | undefined;
  /** When set, the pick is judged (why the first choice won) and its verdict pushed here. */
  readonly verdicts?: PickVerdict[] | undefined;
}

export type AggregatedPlan =
  { readonly ok: true; readonly attempts: Attempt[]; readonly chosen: Endpoint } | Extract<ProfileRun, { ok: false }>;

/**
 * Aggregated mode: the profile's picker orders the ready pods; the first topN are the failover list, filled up
 * with the ejected pods (least recently failed first) so a retry has somewhere to go when the healthy ones fail.
 */
export function planAggregated(input: AggregatedPlanInput): AggregatedPlan {
  const { cycle, profile } = input;
  const run = runProfile(cycle, profile, input.pool.aggregated, input.slot, {
    what: 'aggregated',
    exclude: input.exclude,
    recorder: input.recorder,
    timing: input.timing,
    judge: input.verdicts !== undefined,
  });
  if (!run.ok) return run;
  const result = timedPick(cycle, profile, { candidates: run.candidates, finals: run.finals, count: input.topN }, input.timing);
  const order = result.order;
  const picked: IndexedEndpoint[] = order.map((i) => run.candidates.endpoint(i));
  run.trace?.chose(picked.map((e) => e.key));
  if (input.verdicts) {
    const verdict = judgePick(cycle, profile, run, input.slot, order[0], result);
    input.verdicts.push(verdict);
    run.trace?.judged(verdict);
  }
  for (const e of run.lastResort) if (picked.length < input.topN) picked.push(e);
  return { ok: true, attempts: picked.map((e) => ({ endpoint: e.ref })), chosen: picked[0] };
}
