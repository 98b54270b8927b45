import type { DecisionOrError, SchedulingRequest } from '@triad/bus';
import { TriadError } from '@triad/errors';
import type { PickVerdict, PluginKind, SchedulingObserver, SchedulingPhase, SchedulingPhaseSink } from '@triad/scheduling';
import { ATTR, finishDecideSpan, finishPhaseSpan, put, startPhaseSpan, type Traced } from '@triad/telemetry';

/** What the scheduler's observer forwards plugin timings to (the metrics). */
export interface PluginTimeSink {
  /** `ms` spent in `calls` calls of the plugin (a sampled call stands for `calls` calls, its time scaled alike). */
  pluginTime(plugin: string, kind: PluginKind, ms: number, calls: number): void;
  /** Why each profile's first choice won (pick-quality metrics). */
  picked?(verdicts: readonly PickVerdict[]): void;
}

/** Every how many decisions the pick verdicts are worked out and counted, unless told otherwise. */
export const DEFAULT_PICK_QUALITY_EVERY = 16;

/**
 * Every how many decisions the plugin calls are timed for the plugin metrics, unless told otherwise: two clock reads
 * and a report per plugin call, about 50 calls per EPD decision, were 0.6 % (EPD, 1 connection) to 1.6 % (32) of a
 * replica's CPU under perf.
 */
export const DEFAULT_PLUGIN_TIMING_EVERY = 8;

/**
 * The scheduler's `SchedulingObserver`: plugin timings go to the metrics, as always; the phases of a request are
 * collected only when the handler asked for them (`collect`, called when the request's decide span records), so an
 * untraced or sampled-out request builds no phase records at all. Pick verdicts (the pick-quality counters) are a
 * sample: one decision in `pickQualityEvery` is judged, as the judgement copies every score column of its runs.
 * Plugin timings are a sample too: one decision in `pluginTimingEvery` is timed, and each of its calls counts for
 * that many calls and its time that many times (the metrics' totals stay estimates of all calls).
 */
export class DecideObserver implements SchedulingObserver {
  readonly #metrics: PluginTimeSink;
  readonly #every: number;
  /** Decisions since the last judged one. */
  #sinceJudged: number;
  readonly #timeEvery: number;
  /** Decisions since the last timed one. */
  #sinceTimed: number;
  #next: { readonly request: SchedulingRequest; readonly phases: SchedulingPhase[] } | undefined;

  constructor(
    metrics: PluginTimeSink,
    pickQualityEvery: number = DEFAULT_PICK_QUALITY_EVERY,
    pluginTimingEvery: number = DEFAULT_PLUGIN_TIMING_EVERY,
  ) {
    this.#metrics = metrics;
    this.#every = Math.max(1, Math.floor(pickQualityEvery));
    // The first decision is judged, so a fresh replica's counters show its profiles at once.
    this.#sinceJudged = this.#every - 1;
    this.#timeEvery = Math.max(1, Math.floor(pluginTimingEvery));
    // Likewise the first decision is timed.
    this.#sinceTimed = this.#timeEvery - 1;
  }

  timesPlugins(): boolean {
    this.#sinceTimed++;
    if (this.#sinceTimed < this.#timeEvery) return false;
    this.#sinceTimed = 0;
    return true;
  }

  judges(): boolean {
    this.#sinceJudged++;
    if (this.#sinceJudged < this.#every) return false;
    this.#sinceJudged = 0;
    return true;
  }

  pluginTime(plugin: string, kind: PluginKind, ms: number): void {
    this.#metrics.pluginTime(plugin, kind, ms * this.#timeEvery, this.#timeEvery);
  }

  picked(verdicts: readonly PickVerdict[]): void {
    this.#metrics.picked?.(verdicts);
  }

  /** Collects the phases of `request` when it is scheduled next; the returned list fills during `schedule()`. */
  collect(request: SchedulingRequest): readonly SchedulingPhase[] {
    const phases: SchedulingPhase[] = [];
    this.#next = { request, phases };
    return phases;
  }

  phasesFor(request: SchedulingRequest): SchedulingPhaseSink | undefined {
    const next = this.#next;
    if (next === undefined) return undefined;
    this.#next = undefined;
    if (next.request !== request) return undefined;
    const phases = next.phases;
    return (phase) => phases.push(phase);
  }
}

/** Turns a scheduler clock reading (`performance.now()`) into epoch milliseconds. */
export type ToEpoch = (clock: number) => number;

/**
 * The epoch time of clock readings taken after this call, anchored at this call: create it right after the decide
 * span starts. One anchor for all of a request's phases keeps their order and durations exact (the SDK would
 * anchor each span on its own, to a millisecond-resolution `Date.now()`, which scrambles sub-millisecond phases),
 * and, as the decide span's own start is the same `Date.now()` millisecond, the phases fall inside it.
 */
export function epochAnchor(): ToEpoch {
  const wall = Date.now();
  const perf = performance.now();
  return (clock) => wall + (clock - perf);
}

/** Span attributes, as `@triad/telemetry` takes them. */
type Attributes = Parameters<typeof put>[0];

/**
 * A phase as event attributes (the names the phase spans use). On a phase span the span names the profile and,
 * for scores, the candidates; on the decide span (picks, hooks) the event says it all.
 */
function eventAttributes(p: SchedulingPhase, onDecide: boolean): Attributes {
  const attrs: Attributes = {};
  if (onDecide) attrs[ATTR.schedulerProfile] = p.profile;
  put(attrs, ATTR.schedulerPlugin, p.plugin);
  if (onDecide) put(attrs, ATTR.pdGroup, p.group);
  put(attrs, ATTR.itemIndex, p.item);
  if (onDecide || p.kind === 'filter') {
    put(attrs, ATTR.schedulerCandidates, p.candidatesIn);
    put(attrs, ATTR.schedulerRemaining, p.candidatesOut);
  }
  return attrs;
}

/**
 * One phase span (`filter {profile}` or `score {profile}`) over a run's plugin calls of that kind: from the first
 * call's start to the last one's end, candidates in and out, and an event per plugin at its start (the plugin;
 * for filters also candidates in and out), so Jaeger shows which filter removed whom without a span per call.
 */
function recordPhase(
  decide: Traced,
  name: 'filter' | 'score',
  plan: SchedulingPhase | undefined,
  calls: readonly SchedulingPhase[],
  at: ToEpoch,
): void {
  const first = calls[0];
  const last = calls[calls.length - 1];
  const from = first ?? plan;
  if (!from) return;
  const candidates = plan?.candidatesIn ?? first?.candidatesIn;
  const span = startPhaseSpan(decide, name, {
    profile: from.profile,
    ...(candidates !== undefined ? { candidates } : {}),
    ...(from.group !== undefined ? { pdGroup: from.group } : {}),
    startTime: at(from.start),
  });
  if (span.span.isRecording()) for (const call of calls) span.span.addEvent(name, eventAttributes(call, false), at(call.start));
  const remaining = last ? last.candidatesOut : 0;
  const failure = plan?.failure;
  finishPhaseSpan(span, {
    ...(remaining !== undefined ? { remaining } : {}),
    ...(failure ? { error: new TriadError(failure.code, failure.message) } : {}),
    endTime: at(last?.end ?? (plan as SchedulingPhase).end),
  });
}

/**
 * Ends a decided request's decide span with its phases, recorded after the fact. Each profile run (the decode
 * endpoints, one PD group's prefill endpoints, the encoders) becomes a `filter {profile}` span and a
 * `score {profile}` span with an event per plugin; a run that failed marks its filter span with the reason. Picks
 * and post-schedule hooks are events on the decide span. Times are the phases' own clock readings (`at` turns them
 * into epoch time), so the spans show when each step really ran. The decide span ends before its phase spans are
 * built, so its duration is the decision's, not the tracing's. A span per plugin call would be 50+ spans for a PD
 * decision over five PD groups; this is two per profile run, and an event costs a fraction of a span.
 */
export function finishDecideWithPhases(decide: Traced, decision: DecisionOrError, phases: readonly SchedulingPhase[], at: ToEpoch): void {
  if (decide.span.isRecording()) {
    for (const p of phases) {
      if (p.kind === 'picker' || p.kind === 'post-schedule')
        decide.span.addEvent(p.kind === 'picker' ? 'pick' : p.kind, eventAttributes(p, true), at(p.start));
    }
  }
  finishDecideSpan(decide, decision);
  let run: SchedulingPhase[] = [];
  const flush = (plan: SchedulingPhase | undefined) => {
    const filters = run.filter((p) => p.kind === 'filter');
    const scorers = run.filter((p) => p.kind === 'scorer');
    if (filters.length > 0 || plan?.failure) recordPhase(decide, 'filter', plan, filters, at);
    if (scorers.length > 0) recordPhase(decide, 'score', undefined, scorers, at);
    run = [];
  };
  for (const p of phases) {
    if (p.kind === 'filter' || p.kind === 'scorer') run.push(p);
    else if (p.kind === 'plan') flush(p);
  }
  // Every run ends with its plan; plugin phases without one (a library change) still show.
  if (run.length > 0) flush(undefined);
}
