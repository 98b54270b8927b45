import type { SchedulingRequest } from '@triad/bus';
import { TriadError } from '@triad/errors';
import type { PluginKind, SchedulingObserver, SchedulingPhase, SchedulingPhaseSink } from '@triad/scheduling';
import { finishPhaseSpan, startPhaseSpan, type Parent, type Traced } from '@triad/telemetry';

/** What the scheduler's observer forwards plugin timings to (the metrics). */
export interface PluginTimeSink {
  pluginTime(plugin: string, kind: PluginKind, ms: number): void;
}

/**
 * The scheduler's `SchedulingObserver`: plugin timings go to the metrics, as always; the phases of a request are
 * collected only when the handler asked for them (`collect`, called when the request's decide span records), so an
 * untraced or sampled-out request builds no phase records at all.
 */
export class DecideObserver implements SchedulingObserver {
  readonly #metrics: PluginTimeSink;
  #next: { readonly request: SchedulingRequest; readonly phases: SchedulingPhase[] } | undefined;

  constructor(metrics: PluginTimeSink) {
    this.#metrics = metrics;
  }

  pluginTime(plugin: string, kind: PluginKind, ms: number): void {
    this.#metrics.pluginTime(plugin, kind, ms);
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

/** Span name prefix per phase kind: `plan decode`, `filter decode`, `score decode`, `pick decode`, ... */
const PHASE_NAMES: Record<SchedulingPhase['kind'], string> = {
  plan: 'plan', filter: 'filter', scorer: 'score', picker: 'pick', 'post-schedule': 'post-schedule',
};

function startPhase(parent: Parent, p: SchedulingPhase): Traced {
  return startPhaseSpan(parent, PHASE_NAMES[p.kind], {
    profile: p.profile,
    ...(p.plugin !== undefined ? { plugin: p.plugin } : {}),
    ...(p.candidatesIn !== undefined ? { candidates: p.candidatesIn } : {}),
    ...(p.group !== undefined ? { pdGroup: p.group } : {}),
    ...(p.item !== undefined ? { item: p.item } : {}),
    startTime: p.start,
  });
}

function finishPhase(t: Traced, p: SchedulingPhase): void {
  finishPhaseSpan(t, {
    ...(p.candidatesOut !== undefined ? { remaining: p.candidatesOut } : {}),
    ...(p.failure ? { error: new TriadError(p.failure.code, p.failure.message) } : {}),
    endTime: p.end,
  });
}

/**
 * Records a decided request's phases, after the fact, as children of its decide span: each profile run as a `plan`
 * span holding its filter and scorer spans (the library reports a run's plugins first, then the run), and picks and
 * post-schedule hooks directly under the decide span. Start and end are the phases' own `performance.now()`
 * readings, so the spans show when each step really ran.
 */
export function recordPhaseSpans(decide: Traced, phases: readonly SchedulingPhase[]): void {
  let pending: SchedulingPhase[] = [];
  for (const p of phases) {
    if (p.kind === 'filter' || p.kind === 'scorer') {
      pending.push(p);
    } else if (p.kind === 'plan') {
      const plan = startPhase(decide, p);
      for (const child of pending) finishPhase(startPhase(plan, child), child);
      pending = [];
      finishPhase(plan, p);
    } else {
      finishPhase(startPhase(decide, p), p);
    }
  }
  // Every run ends with its plan; a plugin phase without one (a library change) still shows, under the decide span.
  for (const p of pending) finishPhase(startPhase(decide, p), p);
}
