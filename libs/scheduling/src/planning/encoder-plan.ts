import type { EncoderChoice, MediaItem } from '@triad/bus';
import { ErrorCode } from '@triad/errors';
import type { LoadedProfile } from '../config/load-config';
import type { Endpoint, IndexedEndpoint } from '../state/endpoint';
import type { ModelServerPool } from '../state/model-server-pool';
import type { Cycle } from './cycle';
import type { ExplanationRecorder } from './explanation';
import { runProfile, type ProfileRun, type RunOptions, type ScoreBuffers, type SchedulingObserver } from './profile-run';

export type EncoderPlan =
  | { readonly ok: true; readonly choices: EncoderChoice[]; readonly chosen: Endpoint[] }
  | Extract<ProfileRun, { ok: false }>;

export interface EncoderPlanInput {
  readonly cycle: Cycle;
  readonly profile: LoadedProfile;
  readonly pool: ModelServerPool;
  /** PD group of the chosen decode endpoint; encoders of that group and ungrouped ones qualify. */
  readonly group: string | undefined;
  readonly items: readonly MediaItem[];
  readonly topN: number;
  readonly buffers: ScoreBuffers;
  readonly exclude?: ReadonlySet<string>;
  readonly recorder?: ExplanationRecorder;
  readonly observer?: SchedulingObserver;
}

/**
 * One encoder per media item. The encode profile filters and scores the group's encoders once; then each item is
 * placed by the profile's picker, which sees how many items of this request each encoder already got, so the
 * items of one request spread by load (and, with encoder-affinity, follow their content keys).
 */
export function planEncoders(input: EncoderPlanInput): EncoderPlan {
  const { cycle, profile, items } = input;
  const initial = input.pool.encoders(input.group);
  if (initial.length === 0) {
    const where = input.group === undefined ? '' : ` for PD group '${input.group}'`;
    return { ok: false, code: ErrorCode.SchedNoEncoder, message: `no ready encode endpoint${where}, and the request has ${items.length} media item(s)` };
  }
  const trace = input.recorder?.begin('encode', input.group, initial);
  const opts: RunOptions = { what: 'encode', ...(input.group === undefined ? {} : { where: ` for PD group '${input.group}'` }), ...(input.exclude ? { exclude: input.exclude } : {}), ...(trace ? { trace } : {}), ...(input.observer ? { observer: input.observer } : {}) };
  const run = runProfile(cycle, profile, initial, input.buffers, opts);
  if (!run.ok) return run.code === ErrorCode.SchedNoCandidates ? { ...run, code: ErrorCode.SchedNoEncoder } : run;
  const pending = new Int32Array(run.candidates.length);
  const choices: EncoderChoice[] = [];
  const chosen: Endpoint[] = [];
  for (const item of items) {
    const t0 = input.observer ? performance.now() : 0;
    const picked = profile.picker.pick(cycle, { candidates: run.candidates, finals: run.finals, count: input.topN, item, pending });
    if (input.observer) input.observer.pluginTime(profile.picker.name, 'picker', performance.now() - t0);
    const first = picked.order[0] as number;
    pending[first] = (pending[first] as number) + 1;
    const endpoint = run.candidates[first] as IndexedEndpoint;
    chosen.push(endpoint);
    choices.push({
      item: item.index,
      endpoint: endpoint.ref,
      alternates: picked.order.slice(1).map((i) => (run.candidates[i] as IndexedEndpoint).ref),
      affinity: picked.affinity === true,
    });
  }
  trace?.chose([...new Set(chosen.map((e) => e.key))]);
  return { ok: true, choices, chosen };
}
