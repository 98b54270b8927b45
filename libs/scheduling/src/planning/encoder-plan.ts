import type { EncoderChoice, MediaItem } from '@triad/bus';
import { ErrorCode } from '@triad/errors';
import type { LoadedProfile } from '../config/load-config';
import type { Endpoint } from '../state/endpoint';
import { EndpointList } from '../state/endpoint-list';
import type { ModelServerPool } from '../state/model-server-pool';
import type { Cycle } from './cycle';
import type { ExplanationRecorder } from './explanation';
import { judgePick, type PickVerdict } from './pick-verdict';
import { runProfile, timedPick, type ProfileRun, type ProfileSlot, type Timing } from './profile-run';

export type EncoderPlan =
  | {
      readonly ok: true;
      readonly choices: EncoderChoice[];
      readonly chosen: Endpoint[];
      /** Every encoder of the group is ejected (the stage has no healthy endpoint). */
      readonly allEjected: boolean;
    }
  | Extract<ProfileRun, { ok: false }>;

export interface EncoderPlanInput {
  readonly cycle: Cycle;
  readonly profile: LoadedProfile;
  readonly pool: ModelServerPool;
  /** PD group of the chosen decode endpoint; encoders of that group and ungrouped ones qualify. */
  readonly group: string | undefined;
  readonly items: readonly MediaItem[];
  readonly topN: number;
  readonly slot: ProfileSlot;
  readonly exclude: ReadonlySet<string> | undefined;
  readonly recorder: ExplanationRecorder | undefined;
  readonly timing: Timing | undefined;
  /** When set, each item's pick is judged and its verdict pushed here. */
  readonly verdicts?: PickVerdict[] | undefined;
}

/**
 * One encoder per media item. The encode profile filters and scores the group's encoders once; then each item is
 * placed by the profile's picker, which sees how many items of this request each encoder already got, so the
 * items of one request spread by load (and, with encoder-affinity, follow their content keys).
 */
export function planEncoders(input: EncoderPlanInput): EncoderPlan {
  const { cycle, profile, items } = input;
  const source = input.pool.encoders(input.group);
  const where = input.group === undefined ? '' : ` for PD group '${input.group}'`;
  if ((source instanceof EndpointList ? source.size : source.length) === 0) {
    return {
      ok: false,
      code: ErrorCode.SchedNoEncoder,
      message: `no ready encode endpoint${where}, and the request has ${items.length} media item(s)`,
    };
  }
  const run = runProfile(cycle, profile, source, input.slot, {
    what: 'encode',
    where,
    group: input.group,
    exclude: input.exclude,
    recorder: input.recorder,
    timing: input.timing,
    judge: input.verdicts !== undefined,
  });
  if (!run.ok) return run.code === ErrorCode.SchedNoCandidates ? { ...run, code: ErrorCode.SchedNoEncoder } : run;
  const set = run.candidates;
  const pending = new Int32Array(set.size);
  const choices: EncoderChoice[] = [];
  const chosen: Endpoint[] = [];
  for (const item of items) {
    const picked = timedPick(
      cycle,
      profile,
      { candidates: set, finals: run.finals, count: input.topN, item, pending },
      input.timing,
      input.group,
    );
    const first = picked.order[0];
    if (input.verdicts) {
      const verdict = judgePick(cycle, profile, run, input.slot, first, picked);
      input.verdicts.push(verdict);
      run.trace?.judged(verdict);
    }
    pending[first] = pending[first] + 1;
    const endpoint = set.endpoint(first);
    chosen.push(endpoint);
    const alternates = picked.order.slice(1).map((i) => set.endpoint(i).ref);
    // Ejected encoders come last (least recently failed first): an item retries on them when the healthy ones fail.
    for (const e of run.lastResort) if (alternates.length + 1 < input.topN) alternates.push(e.ref);
    choices.push({ item: item.index, endpoint: endpoint.ref, alternates, affinity: picked.affinity === true });
  }
  run.trace?.chose([...new Set(chosen.map((e) => e.key))]);
  return { ok: true, choices, chosen, allEjected: run.allEjected };
}
