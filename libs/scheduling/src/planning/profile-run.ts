import type { SchedulingRequest } from '@triad/bus';
import { ErrorCode, type ErrorCodeValue } from '@triad/errors';
import type { LoadedProfile } from '../config/load-config';
import type { PickInput, PickResult, PluginKind, ProfileRole } from '../framework/plugin';
import type { IndexedEndpoint } from '../state/endpoint';
import type { EndpointIndex } from '../state/endpoint-index';
import { EndpointList } from '../state/endpoint-list';
import type { InflightTracker } from '../state/inflight-tracker';
import type { CandidateSource } from '../state/model-server-pool';
import { ejectionOf } from '../state/outlier-table';
import { CandidateSet } from './candidate-set';
import { fillPrefix } from './fill-prefix';
import type { Cycle } from './cycle';
import type { ExplanationRecorder, ProfileTrace } from './explanation';
import type { PickVerdict } from './pick-verdict';

/**
 * One timed step of a decision, reported to the observer's phase sink once it has ended (so a tracer can record
 * it after the fact). Times are readings of the scheduler's `clock`. Kinds:
 * - `plan`: one profile run, i.e. the filters and scorers of one profile over one pool (the decode endpoints, one
 *   PD group's prefill endpoints, the encoders). `candidatesIn` is the pool, `candidatesOut` what survived the
 *   filters (0 when the run failed, with `failure` saying why). Reported after its filter and scorer phases.
 * - `filter`, `scorer`: one plugin call inside the plan reported next (`exclude` is the request's exclusion list,
 *   applied before the filters); `picker`: one pick (`candidatesOut` = endpoints picked; one per media item for
 *   encode); `post-schedule`: one hook on the chosen endpoint (no candidate counts).
 */
export interface SchedulingPhase {
  readonly kind: 'plan' | PluginKind;
  readonly profile: ProfileRole;
  /** The plugin; undefined for `plan`. */
  readonly plugin: string | undefined;
  /** PD group of a prefill or encode run. */
  readonly group: string | undefined;
  /** Media item index of an encode pick. */
  readonly item: number | undefined;
  readonly candidatesIn: number | undefined;
  readonly candidatesOut: number | undefined;
  readonly start: number;
  readonly end: number;
  /** Why a `plan` ended without candidates. */
  readonly failure: { readonly code: ErrorCodeValue; readonly message: string } | undefined;
}

/** Receives one request's phases, in the order they end. */
export type SchedulingPhaseSink = (phase: SchedulingPhase) => void;

/** Per-plugin timing sink (the scheduler app turns it into metrics) and, optionally, per-request phase records. */
export interface SchedulingObserver {
  pluginTime(plugin: string, kind: PluginKind, ms: number): void;
  /**
   * Asked once per request, before it is decided: a sink for that request's phases, or undefined to skip them
   * (no phase records are built then). Without this method no request reports phases.
   */
  phasesFor?(request: SchedulingRequest): SchedulingPhaseSink | undefined;
  /**
   * Receives, for each judged decision, why each profile's first choice won (quality metrics). A judged decision's
   * profile runs keep their scorers' scores for the judgement (one copy of each score column).
   */
  picked?(verdicts: readonly PickVerdict[]): void;
  /**
   * Asked once per request when `picked` is set: whether to judge this decision (a sample keeps the judgement off
   * most decisions). Without this method every decision is judged.
   */
  judges?(request: SchedulingRequest): boolean;
  /**
   * Asked once per request: whether to time this decision's plugin calls for `pluginTime` (a sample keeps two clock
   * reads and a report per plugin call off most decisions). A request whose phases are collected is timed anyway,
   * but reported to `pluginTime` only when this says so. Without this method every decision is timed.
   */
  timesPlugins?(request: SchedulingRequest): boolean;
}

/**
 * The scheduler's instruments, which exist only when an observer is set: the clock, the observer, and the phase
 * sink of the request being decided (set per request; undefined when the observer declined it).
 */
export class Timing {
  sink: SchedulingPhaseSink | undefined = undefined;
  /** Whether the decision being made reports its plugin times to the observer (`timesPlugins`). */
  reports = true;

  constructor(
    readonly observer: SchedulingObserver,
    readonly clock: () => number,
  ) {}

  /** Ends a plugin call that began at `start`: reports its duration to the observer and returns the end time. */
  pluginDone(plugin: string, kind: PluginKind, start: number): number {
    const end = this.clock();
    if (this.reports) this.observer.pluginTime(plugin, kind, end - start);
    return end;
  }
}

/** A phase record (one object shape for every kind). */
export function phase(
  kind: SchedulingPhase['kind'],
  profile: ProfileRole,
  plugin: string | undefined,
  group: string | undefined,
  candidatesIn: number | undefined,
  candidatesOut: number | undefined,
  start: number,
  end: number,
  item?: number,
  failure?: SchedulingPhase['failure'],
): SchedulingPhase {
  return { kind, profile, plugin, group, item, candidatesIn, candidatesOut, start, end, failure };
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
  /** Each scorer's clamped scores, scorer s of candidate i at `s·size + i` (kept only for a judged run). */
  columns = new Float64Array(1024);

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

  ensureColumns(n: number): void {
    if (this.columns.length < n) this.columns = new Float64Array(Math.max(n, this.columns.length * 2));
  }
}

export type ProfileRun =
  | {
      readonly ok: true;
      readonly candidates: CandidateSet;
      readonly finals: Float64Array;
      readonly trace: ProfileTrace | undefined;
      /**
       * Ejected endpoints left out of the ranking, least recently failed first: the plans add them after the
       * ranked ones, so a retry may still use them when no healthy endpoint is left.
       */
      readonly lastResort: readonly IndexedEndpoint[];
      /** Every candidate of the stage was ejected (ranked anyway, by the panic threshold or the ceiling). */
      readonly allEjected: boolean;
    }
  | { readonly ok: false; readonly code: ErrorCodeValue; readonly message: string };

export interface RunOptions {
  /** The stage, for error messages. */
  readonly what: string;
  /** Where, for error messages, e.g. ` in PD group 'g1'`. */
  readonly where?: string;
  readonly exclude?: ReadonlySet<string> | undefined;
  readonly recorder?: ExplanationRecorder | undefined;
  /** Group recorded in the explanation and the phases. */
  readonly group?: string | undefined;
  readonly timing?: Timing | undefined;
  /** Keep each scorer's scores (`slot.columns`) so the pick can be judged (`judgePick`). */
  readonly judge?: boolean | undefined;
  /** Whether the run's endpoints would encode the request's media (`CycleContext.encodesMedia`; default true). */
  readonly encodesMedia?: boolean | undefined;
}

/** The name ejected endpoints carry as `filteredBy` in explanations and phases. */
const OUTLIER_EJECTION = 'outlier-ejection';

const NO_ENDPOINTS: readonly IndexedEndpoint[] = [];

const clampScore = (v: number): number => (v >= 0 ? (v <= 100 ? v : 100) : 0);
const sizeOf = (source: CandidateSource): number => (source instanceof EndpointList ? source.size : source.length);

/**
 * Filters then scores one profile's candidates: `final[i] = Σ weight·clamp(score[i])`. A candidate a scorer leaves
 * at 0 stays a candidate. A filter that empties the set ends the run with its name in the reason. The result's
 * `candidates` and `finals` belong to `slot` and stay valid until the slot's next run. With a phase sink, the run
 * is reported as a `plan` phase after its plugins' phases.
 */
export function runProfile(cycle: Cycle, profile: LoadedProfile, source: CandidateSource, slot: ProfileSlot, opts: RunOptions): ProfileRun {
  const timing = opts.timing;
  const sink = timing?.sink;
  if (!timing || !sink) return filterAndScore(cycle, profile, source, slot, opts, timing, undefined);
  const start = timing.clock();
  const run = filterAndScore(cycle, profile, source, slot, opts, timing, sink);
  const end = timing.clock();
  sink(
    run.ok
      ? phase('plan', profile.role, undefined, opts.group, sizeOf(source), run.candidates.size, start, end)
      : phase('plan', profile.role, undefined, opts.group, sizeOf(source), 0, start, end, undefined, {
          code: run.code,
          message: run.message,
        }),
  );
  return run;
}

function filterAndScore(
  cycle: Cycle,
  profile: LoadedProfile,
  source: CandidateSource,
  slot: ProfileSlot,
  opts: RunOptions,
  timing: Timing | undefined,
  sink: SchedulingPhaseSink | undefined,
): ProfileRun {
  cycle.role = profile.role;
  cycle.encodesMedia = opts.encodesMedia !== false;
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
    const before = set.size;
    const t0 = sink && timing ? timing.clock() : 0;
    for (let i = 0; i < set.size; i++) keep[i] = exclude.has(set.endpoint(i).key) ? 0 : 1;
    trace?.filtered('exclude', set, keep);
    set.compact(keep);
    if (sink && timing) sink(phase('filter', profile.role, 'exclude', opts.group, before, set.size, t0, timing.clock()));
    if (set.size === 0)
      return {
        ok: false,
        code: ErrorCode.SchedNoCandidates,
        message: `every ready ${opts.what} endpoint${where} is excluded by the request`,
      };
  }
  for (const f of profile.filters) {
    const keep = slot.keep;
    fillPrefix(keep, 1, set.size);
    const before = set.size;
    const t0 = timing ? timing.clock() : 0;
    f.filter(cycle, set, keep);
    const t1 = timing ? timing.pluginDone(f.name, 'filter', t0) : 0;
    trace?.filtered(f.name, set, keep);
    set.compact(keep);
    if (sink) sink(phase('filter', profile.role, f.name, opts.group, before, set.size, t0, t1));
    if (set.size === 0) {
      return {
        ok: false,
        code: ErrorCode.SchedFilteredOut,
        message: `${opts.what} endpoints${where} have all been filtered out by "${f.name}"`,
      };
    }
  }
  // After the filters: an ejected endpoint a filter would drop is no last resort either.
  const outliers = cycle.outliers;
  const policy = cycle.ejection;
  let lastResort: IndexedEndpoint[] | undefined;
  let allEjected = false;
  if (outliers !== undefined && outliers.size > 0 && policy !== undefined) {
    const ejection = ejectionOf(outliers, profile.role, cycle.now, set.size, (i) => set.endpoint(i).key, policy);
    if (ejection !== undefined) allEjected = ejection.all;
    if (ejection !== undefined && ejection.drop.length > 0) {
      const keep = slot.keep;
      const before = set.size;
      const t0 = sink && timing ? timing.clock() : 0;
      fillPrefix(keep, 1, set.size);
      lastResort = ejection.drop.map((i) => set.endpoint(i));
      for (const i of ejection.drop) keep[i] = 0;
      trace?.filtered(OUTLIER_EJECTION, set, keep);
      set.compact(keep);
      if (sink && timing) sink(phase('filter', profile.role, OUTLIER_EJECTION, opts.group, before, set.size, t0, timing.clock()));
    }
  }
  const n = set.size;
  const { finals, scratch } = slot;
  fillPrefix(finals, 0, n);
  cycle.bounded.clear();
  const judge = opts.judge === true;
  if (judge) slot.ensureColumns(profile.scorers.length * n);
  let s = 0;
  for (const { scorer, weight } of profile.scorers) {
    fillPrefix(scratch, 0, n);
    const t0 = timing ? timing.clock() : 0;
    scorer.score(cycle, set, scratch);
    const t1 = timing ? timing.pluginDone(scorer.name, 'scorer', t0) : 0;
    for (let i = 0; i < n; i++) {
      const v = clampScore(scratch[i]);
      scratch[i] = v;
      finals[i] = finals[i] + weight * v;
    }
    if (judge) slot.columns.set(scratch.subarray(0, n), s * n);
    s++;
    trace?.scored(scorer.name, set, scratch);
    if (sink) sink(phase('scorer', profile.role, scorer.name, opts.group, n, n, t0, t1));
  }
  trace?.finals(set, finals);
  return { ok: true, candidates: set, finals, trace, lastResort: lastResort ?? NO_ENDPOINTS, allEjected };
}

/**
 * Runs the profile's picker on a run's candidates: timed for the observer, and reported as a `picker` phase (with
 * the run's group and the media item, if any) when a sink is set.
 */
export function timedPick(cycle: Cycle, profile: LoadedProfile, input: PickInput, timing: Timing | undefined, group?: string): PickResult {
  cycle.role = profile.role;
  if (!timing) return profile.picker.pick(cycle, input);
  const t0 = timing.clock();
  const picked = profile.picker.pick(cycle, input);
  const t1 = timing.pluginDone(profile.picker.name, 'picker', t0);
  timing.sink?.(
    phase('picker', profile.role, profile.picker.name, group, input.candidates.size, picked.order.length, t0, t1, input.item?.index),
  );
  return picked;
}
