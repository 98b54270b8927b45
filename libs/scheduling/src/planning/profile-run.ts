import { ErrorCode, type ErrorCodeValue } from '@triad/errors';
import type { LoadedProfile } from '../config/load-config';
import type { EndpointIndex } from '../state/endpoint-index';
import { EndpointList } from '../state/endpoint-list';
import type { InflightTracker } from '../state/inflight-tracker';
import type { CandidateSource } from '../state/model-server-pool';
import { CandidateSet } from './candidate-set';
import type { Cycle } from './cycle';
import type { ExplanationRecorder, ProfileTrace } from './explanation';

/** Per-plugin timing sink (the scheduler app turns it into metrics). */
export interface SchedulingObserver {
  pluginTime(plugin: string, kind: 'filter' | 'scorer' | 'picker' | 'post-schedule', ms: number): void;
}

/**
 * The reusable state of one profile slot (aggregated, decode, prefill, encode): its candidate set and score
 * buffers, grown on demand, so a request allocates no per-endpoint arrays.
 */
export class ProfileSlot {
  readonly set: CandidateSet;
  finals = new Float64Array(256);
  scratch = new Float64Array(256);
  keep = new Uint8Array(256);

  constructor(index: EndpointIndex, tracker: InflightTracker) {
    this.set = new CandidateSet(index, tracker);
  }

  ensure(n: number): void {
    if (this.finals.length >= n) return;
    const size = Math.max(n, this.finals.length * 2);
    this.finals = new Float64Array(size);
    this.scratch = new Float64Array(size);
    this.keep = new Uint8Array(size);
  }
}

export type ProfileRun =
  | { readonly ok: true; readonly candidates: CandidateSet; readonly finals: Float64Array; readonly trace: ProfileTrace | undefined }
  | { readonly ok: false; readonly code: ErrorCodeValue; readonly message: string };

export interface RunOptions {
  /** The stage, for error messages. */
  readonly what: string;
  /** Where, for error messages, e.g. ` in PD group 'g1'`. */
  readonly where?: string;
  readonly exclude?: ReadonlySet<string> | undefined;
  readonly recorder?: ExplanationRecorder | undefined;
  /** Group recorded in the explanation. */
  readonly group?: string | undefined;
  readonly observer?: SchedulingObserver | undefined;
}

const clampScore = (v: number): number => (v >= 0 ? (v <= 100 ? v : 100) : 0);
const sizeOf = (source: CandidateSource): number => (source instanceof EndpointList ? source.size : source.length);

/**
 * Filters then scores one profile's candidates: `final[i] = Σ weight·clamp(score[i])`. A candidate a scorer leaves
 * at 0 stays a candidate. A filter that empties the set ends the run with its name in the reason. The result's
 * `candidates` and `finals` belong to `slot` and stay valid until the slot's next run.
 */
export function runProfile(cycle: Cycle, profile: LoadedProfile, source: CandidateSource, slot: ProfileSlot, opts: RunOptions): ProfileRun {
  cycle.role = profile.role;
  const where = opts.where ?? '';
  if (sizeOf(source) === 0) return { ok: false, code: ErrorCode.SchedNoCandidates, message: `no ready ${opts.what} endpoint${where}` };
  const set = slot.set;
  set.reset(source);
  slot.ensure(set.size);
  const trace = opts.recorder?.begin(profile.role, opts.group);
  trace?.start(set);
  const exclude = opts.exclude;
  if (exclude && exclude.size > 0) {
    const keep = slot.keep;
    for (let i = 0; i < set.size; i++) keep[i] = exclude.has(set.endpoint(i).key) ? 0 : 1;
    trace?.filtered('exclude', set, keep);
    set.compact(keep);
    if (set.size === 0) return { ok: false, code: ErrorCode.SchedNoCandidates, message: `every ready ${opts.what} endpoint${where} is excluded by the request` };
  }
  const observer = opts.observer;
  for (const f of profile.filters) {
    const keep = slot.keep;
    keep.fill(1, 0, set.size);
    const t0 = observer ? performance.now() : 0;
    f.filter(cycle, set, keep);
    if (observer) observer.pluginTime(f.name, 'filter', performance.now() - t0);
    trace?.filtered(f.name, set, keep);
    set.compact(keep);
    if (set.size === 0) {
      return { ok: false, code: ErrorCode.SchedFilteredOut, message: `${opts.what} endpoints${where} have all been filtered out by "${f.name}"` };
    }
  }
  const n = set.size;
  const { finals, scratch } = slot;
  finals.fill(0, 0, n);
  for (const { scorer, weight } of profile.scorers) {
    scratch.fill(0, 0, n);
    const t0 = observer ? performance.now() : 0;
    scorer.score(cycle, set, scratch);
    if (observer) observer.pluginTime(scorer.name, 'scorer', performance.now() - t0);
    for (let i = 0; i < n; i++) {
      const v = clampScore(scratch[i] as number);
      scratch[i] = v;
      finals[i] = (finals[i] as number) + weight * v;
    }
    trace?.scored(scorer.name, set, scratch);
  }
  trace?.finals(set, finals);
  return { ok: true, candidates: set, finals, trace };
}
