import { ErrorCode, type ErrorCodeValue } from '@triad/errors';
import type { LoadedProfile } from '../config/load-config';
import type { Endpoint } from '../state/endpoint';
import type { Cycle } from './cycle';
import type { ProfileTrace } from './explanation';

/** Per-plugin timing sink (the scheduler app turns it into metrics). */
export interface SchedulingObserver {
  pluginTime(plugin: string, kind: 'filter' | 'scorer' | 'picker' | 'post-schedule', ms: number): void;
}

/** Reusable score buffers of one profile slot, grown on demand so a request allocates no big arrays. */
export class ScoreBuffers {
  finals = new Float64Array(256);
  scratch = new Float64Array(256);

  ensure(n: number): void {
    if (this.finals.length >= n) return;
    const size = Math.max(n, this.finals.length * 2);
    this.finals = new Float64Array(size);
    this.scratch = new Float64Array(size);
  }
}

export type ProfileRun =
  | { readonly ok: true; readonly candidates: readonly Endpoint[]; readonly finals: Float64Array }
  | { readonly ok: false; readonly code: ErrorCodeValue; readonly message: string };

export interface RunOptions {
  readonly exclude?: ReadonlySet<string>;
  readonly trace?: ProfileTrace;
  readonly observer?: SchedulingObserver;
  /** The stage, for error messages. */
  readonly what: string;
  /** Where, for error messages, e.g. ` in PD group 'g1'`. */
  readonly where?: string;
}

const clampScore = (v: number): number => (v >= 0 ? (v <= 100 ? v : 100) : 0);

/**
 * Filters then scores one profile's candidates: `final[i] = Σ weight·clamp(score[i])`. An endpoint a scorer leaves
 * at 0 stays a candidate. A filter that empties the set ends the run with its name in the reason.
 */
export function runProfile(cycle: Cycle, profile: LoadedProfile, initial: readonly Endpoint[], buffers: ScoreBuffers, opts: RunOptions): ProfileRun {
  cycle.role = profile.role;
  const where = opts.where ?? '';
  if (initial.length === 0) return { ok: false, code: ErrorCode.SchedNoCandidates, message: `no ready ${opts.what} endpoint${where}` };
  let candidates = initial;
  const exclude = opts.exclude;
  if (exclude && exclude.size > 0) {
    candidates = candidates.filter((e) => !exclude.has(e.key));
    opts.trace?.filtered('exclude', initial, candidates);
    if (candidates.length === 0) return { ok: false, code: ErrorCode.SchedNoCandidates, message: `every ready ${opts.what} endpoint${where} is excluded by the request` };
  }
  const observer = opts.observer;
  for (const f of profile.filters) {
    const t0 = observer ? performance.now() : 0;
    const kept = f.filter(cycle, candidates);
    if (observer) observer.pluginTime(f.name, 'filter', performance.now() - t0);
    opts.trace?.filtered(f.name, candidates, kept);
    if (kept.length === 0) {
      return { ok: false, code: ErrorCode.SchedFilteredOut, message: `${opts.what} endpoints${where} have all been filtered out by "${f.name}"` };
    }
    candidates = kept;
  }
  const n = candidates.length;
  buffers.ensure(n);
  const { finals, scratch } = buffers;
  finals.fill(0, 0, n);
  cycle.stampCandidates(candidates);
  for (const { scorer, weight } of profile.scorers) {
    scratch.fill(0, 0, n);
    const t0 = observer ? performance.now() : 0;
    scorer.score(cycle, candidates, scratch);
    if (observer) observer.pluginTime(scorer.name, 'scorer', performance.now() - t0);
    for (let i = 0; i < n; i++) {
      const v = clampScore(scratch[i] as number);
      scratch[i] = v;
      finals[i] = (finals[i] as number) + weight * v;
    }
    opts.trace?.scored(scorer.name, candidates, scratch);
  }
  opts.trace?.finals(candidates, finals);
  return { ok: true, candidates, finals };
}
