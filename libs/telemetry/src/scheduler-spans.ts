import { SpanKind, type Attributes, type Context, type TimeInput } from '@opentelemetry/api';
import type { DecisionOrError, SchedulingRequest } from '@triad/bus';
import { ATTR, put } from './attributes';
import { decisionAttributes } from './decision-attributes';
import { recordFailure, startTraced, type Parent, type Traced } from './spans';
import { epochOf } from './tracer';

/** What the scheduler knows about one request of a batch when it starts on it. */
export interface DecideSpanInfo {
  readonly request: Pick<SchedulingRequest, 'id' | 'namespace' | 'modelServer' | 'model'> & {
    readonly mediaItems?: readonly unknown[];
    readonly prefixHashes?: readonly string[];
  };
  /** Requests in the NATS message this one came in. */
  readonly batchSize: number;
  readonly subject?: string;
}

/**
 * The scheduler's SERVER span for one request, continuing the gateway's `schedule` span: pass the request's
 * context from `extractBatchTraceContexts(ctx.headers, batch.requests.length)[i]`. Named `schedule` like the
 * client side (the RPC convention), so Jaeger shows gateway `schedule` → scheduler `schedule`.
 */
export function startDecideSpan(parent: Context, info: DecideSpanInfo): Traced {
  return startTraced('schedule', { kind: SpanKind.SERVER, parent }, () => {
    const r = info.request;
    const attrs: Attributes = {
      [ATTR.stage]: 'schedule',
      [ATTR.requestId]: r.id,
      [ATTR.namespace]: r.namespace,
      [ATTR.modelServer]: r.modelServer,
      [ATTR.genAiRequestModel]: r.model,
      [ATTR.messagingSystem]: 'nats',
      [ATTR.messagingDestinationName]: info.subject ?? 'triad.v1.schedule',
      [ATTR.messagingBatchMessageCount]: info.batchSize,
    };
    put(attrs, ATTR.mediaItems, r.mediaItems?.length);
    return attrs;
  });
}

/** Ends the decide span with the decision: chosen endpoints per stage, top-N size; an error decision fails it. */
export function finishDecideSpan(t: Traced, outcome: DecisionOrError | { error: unknown }): void {
  const span = t.span;
  if (span.isRecording()) {
    if ('error' in outcome) {
      recordFailure(t, outcome.error);
    } else {
      span.setAttributes(decisionAttributes(outcome));
      if (!outcome.ok) recordFailure(t, outcome.message, { errorType: outcome.code });
    }
  }
  span.end();
}

export interface PhaseInfo {
  /** Scheduling profile: `aggregated`, `decode`, `prefill`, `encode`. */
  readonly profile?: string;
  /** The filter or scorer plugin, when the span covers one plugin. */
  readonly plugin?: string;
  /** Endpoints entering the phase. */
  readonly candidates?: number;
  readonly pdGroup?: string;
  /** Media item index for encode profiles. */
  readonly item?: number;
  /**
   * When the phase began, if it is reported after the fact (the pure scheduling library times its phases and the
   * app records them afterwards): epoch ms, or a `performance.now()` value taken in this process.
   */
  readonly startTime?: TimeInput;
}

/** A child of the decide span per filter/scorer phase, named `{phase}` or `{phase} {profile}` (`filter decode`). */
export function startPhaseSpan(parent: Parent, phase: string, info: PhaseInfo = {}): Traced {
  return startTraced(
    info.profile ? `${phase} ${info.profile}` : phase,
    {
      parent,
      ...(info.startTime !== undefined ? { startTime: info.startTime } : {}),
    },
    () => {
      const attrs: Attributes = { [ATTR.schedulerPhase]: phase };
      put(attrs, ATTR.schedulerProfile, info.profile);
      put(attrs, ATTR.schedulerPlugin, info.plugin);
      put(attrs, ATTR.schedulerCandidates, info.candidates);
      put(attrs, ATTR.pdGroup, info.pdGroup);
      put(attrs, ATTR.itemIndex, info.item);
      return attrs;
    },
  );
}

/**
 * Ends a phase span with how many endpoints survived it (and optional extra facts, e.g. the top score); `endTime`
 * pairs with a reported `startTime`.
 */
export function finishPhaseSpan(
  t: Traced,
  result: { readonly remaining?: number; readonly error?: unknown; readonly attributes?: Attributes; readonly endTime?: TimeInput } = {},
): void {
  const span = t.span;
  if (span.isRecording()) {
    if (result.remaining !== undefined) span.setAttribute(ATTR.schedulerRemaining, result.remaining);
    if (result.attributes) span.setAttributes(result.attributes);
    if (result.error !== undefined) recordFailure(t, result.error);
  }
  // A `performance.now()` end time as epoch ms: the SDK's span would read one slightly ahead of now as a date.
  span.end(result.endTime === undefined ? undefined : epochOf(result.endTime));
}
