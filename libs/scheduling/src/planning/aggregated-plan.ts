import type { Attempt } from '@triad/bus';
import type { LoadedProfile } from '../config/load-config';
import type { Endpoint, IndexedEndpoint } from '../state/endpoint';
import type { ModelServerPool } from '../state/model-server-pool';
import type { Cycle } from './cycle';
import type { ExplanationRecorder } from './explanation';
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
  });
  if (!run.ok) return run;
  const order = timedPick(cycle, profile, { candidates: run.candidates, finals: run.finals, count: input.topN }, input.timing).order;
  const picked: IndexedEndpoint[] = order.map((i) => run.candidates.endpoint(i));
  run.trace?.chose(picked.map((e) => e.key));
  for (const e of run.lastResort) if (picked.length < input.topN) picked.push(e);
  return { ok: true, attempts: picked.map((e) => ({ endpoint: e.ref })), chosen: picked[0] as Endpoint };
}
