import { SpanKind, type Attributes } from '@opentelemetry/api';
import type { DecisionOrError, Stage } from '@triad/bus';
import {
  ATTR,
  endpointAttributes,
  genAiRequestAttributes,
  genAiResponseAttributes,
  put,
  type EndpointInfo,
  type InferenceRequestInfo,
  type InferenceResponseInfo,
} from './attributes';
import { decisionAttributes } from './decision-attributes';
import { extractTraceContext, type HeaderCarrier } from './propagation';
import { NOOP_TRACED, recordFailure, startTraced, type Parent, type Traced } from './spans';
import { tracing } from './state';

// Span names: the HTTP server span follows the HTTP convention (`POST /v1/chat/completions`); the children are
// named by stage (`route`, `schedule`, `encode`, `prefill`, `decode`, `aggregated`) rather than the GenAI
// `{operation} {model}` form, because prefill and decode of one request would otherwise show as two identical
// `chat <model>` rows in Jaeger. The GenAI attributes are on every leg all the same.

export interface RequestSpanInfo {
  /** HTTP method, upper case. */
  readonly method: string;
  /** The matched route (`/v1/chat/completions`), low cardinality. */
  readonly route: string;
  /** Incoming headers: a client's `traceparent` makes this span its child. */
  readonly headers?: HeaderCarrier;
  readonly requestId?: string;
}

/** The gateway's SERVER span for one HTTP request; every stage span is its child. */
export function startRequestSpan(info: RequestSpanInfo): Traced {
  if (!tracing.tracer) return NOOP_TRACED;
  return startTraced(`${info.method} ${info.route}`, { kind: SpanKind.SERVER, parent: extractTraceContext(info.headers) }, () => {
    const attrs: Attributes = {
      [ATTR.httpRequestMethod]: info.method,
      [ATTR.httpRoute]: info.route,
      [ATTR.urlPath]: info.route,
      [ATTR.stage]: 'request',
    };
    return put(attrs, ATTR.requestId, info.requestId);
  });
}

/** What routing resolved, recorded on the `route` span and copied to the request span for search. */
export interface RouteInfo {
  readonly namespace: string;
  readonly modelServer: string;
  /** Pipeline mode, when routing already knows it (otherwise the decision sets it). */
  readonly mode?: string;
  readonly modelRoute?: string;
  /** The model the engines will see (ModelServer model or LoRA adapter). */
  readonly targetModel?: string;
  readonly lora?: string;
}

export interface RequestOutcome {
  readonly statusCode: number;
  /** The model the client asked for. */
  readonly requestModel?: string;
  readonly operation?: string;
  readonly response?: InferenceResponseInfo;
  readonly error?: unknown;
  /** Overrides the derived `error.type` (e.g. the TriadError code of the failed stage). */
  readonly errorType?: string;
  /** The stage that failed, when one did. */
  readonly failedStage?: string;
  /** Stages skipped for want of a usable endpoint, served by the engine's shortcut (`triad.stage_fallback`). */
  readonly stageFallbacks?: readonly string[];
  /** Continuations of a stream that broke mid-answer (`triad.stream.resumes`), when there were any. */
  readonly streamResumes?: number;
  /** Why a stream that broke mid-answer was not resumed (`triad.stream.resume_refused`). */
  readonly streamResumeRefused?: string;
}

/**
 * Ends the request span. Per the HTTP server convention a 4xx leaves the status unset (the client's fault) and a
 * 5xx is an error with `error.type` = the TriadError code when known, else the status code.
 */
export function finishRequestSpan(t: Traced, outcome: RequestOutcome): void {
  const span = t.span;
  if (span.isRecording()) {
    const attrs: Attributes = { [ATTR.httpResponseStatusCode]: outcome.statusCode };
    put(attrs, ATTR.genAiRequestModel, outcome.requestModel);
    put(attrs, ATTR.genAiOperationName, outcome.operation);
    if (outcome.response) genAiResponseAttributes(outcome.response, attrs);
    if (outcome.stageFallbacks !== undefined && outcome.stageFallbacks.length > 0) attrs[ATTR.stageFallback] = [...outcome.stageFallbacks];
    if (outcome.streamResumes !== undefined && outcome.streamResumes > 0) attrs[ATTR.streamResumes] = outcome.streamResumes;
    put(attrs, ATTR.streamResumeRefused, outcome.streamResumeRefused);
    span.setAttributes(attrs);
    if (outcome.statusCode >= 500) {
      recordFailure(t, outcome.error ?? `HTTP ${outcome.statusCode}`, {
        errorType: outcome.errorType ?? (outcome.error === undefined ? String(outcome.statusCode) : undefined),
        ...(outcome.failedStage ? { attributes: { [ATTR.failedStage]: outcome.failedStage } } : {}),
      });
    }
  }
  span.end();
}

/** `route`: ModelRoute matching for the requested model. */
export function startRouteSpan(parent: Parent, info: { readonly model: string }): Traced {
  return startTraced('route', { parent }, () => ({ [ATTR.stage]: 'route', [ATTR.genAiRequestModel]: info.model }));
}

function routeAttributes(route: RouteInfo): Attributes {
  const attrs: Attributes = { [ATTR.namespace]: route.namespace, [ATTR.modelServer]: route.modelServer };
  put(attrs, ATTR.mode, route.mode);
  put(attrs, ATTR.modelRoute, route.modelRoute);
  put(attrs, ATTR.lora, route.lora);
  return attrs;
}

/** Ends the route span with its result (or error) and copies the result onto the request span. */
export function finishRouteSpan(t: Traced, result: RouteInfo | { error: unknown }, request?: Traced): void {
  if ('error' in result) {
    recordFailure(t, result.error);
  } else {
    // One object for both spans: setAttributes copies the values into each span's own attributes.
    let attrs: Attributes | undefined;
    if (t.span.isRecording()) t.span.setAttributes((attrs = routeAttributes(result)));
    if (request?.span.isRecording()) request.span.setAttributes(attrs ?? routeAttributes(result));
  }
  t.span.end();
}

export interface ScheduleSpanInfo {
  readonly namespace: string;
  readonly modelServer: string;
  readonly mediaItems?: number;
  /** The scheduler did not answer in time and the gateway decided with its own view. */
  readonly local?: boolean;
}

/**
 * `schedule` CLIENT: from entering the coalescing queue to the decision. Inject `t` (via
 * `injectBatchTraceHeaders`) into the NATS request so the scheduler's span becomes its child.
 */
export function startScheduleSpan(parent: Parent, info: ScheduleSpanInfo): Traced {
  return startTraced('schedule', { kind: SpanKind.CLIENT, parent }, () => {
    const attrs: Attributes = {
      [ATTR.stage]: 'schedule',
      [ATTR.namespace]: info.namespace,
      [ATTR.modelServer]: info.modelServer,
      [ATTR.messagingSystem]: 'nats',
      [ATTR.messagingDestinationName]: 'triad.v1.schedule',
    };
    put(attrs, ATTR.mediaItems, info.mediaItems);
    if (info.local) attrs[ATTR.scheduleLocal] = true;
    return attrs;
  });
}

/** Ends the schedule span with the decision (or the error that stopped it). */
export function finishScheduleSpan(
  t: Traced,
  outcome: DecisionOrError | { error: unknown },
  opts: { batchSize?: number; local?: boolean } = {},
): void {
  const span = t.span;
  if (span.isRecording()) {
    if ('error' in outcome) {
      recordFailure(t, outcome.error);
    } else {
      const attrs = decisionAttributes(outcome);
      put(attrs, ATTR.scheduleBatchSize, opts.batchSize);
      if (opts.local) attrs[ATTR.scheduleLocal] = true;
      span.setAttributes(attrs);
      if (!outcome.ok) recordFailure(t, outcome.message, { errorType: outcome.code });
    }
  }
  span.end();
}

/** One engine call (leg) of a request. */
export interface LegInfo extends InferenceRequestInfo {
  readonly endpoint: EndpointInfo;
  readonly mode?: string;
  readonly pdGroup?: string;
  /** The endpoint's role when it differs from the stage (e.g. `both`). */
  readonly role?: string;
  /** 0 for the first try, 1.. for failover attempts (each attempt is its own span). */
  readonly attempt?: number;
  /** The media item an encode leg carries. */
  readonly item?: { readonly index: number; readonly modality?: string; readonly bytes?: number; readonly affinity?: boolean };
}

/**
 * A CLIENT span for one engine call, named by stage. Inject its context into the engine request headers
 * (`injectTraceHeaders(t, headers)`) so an engine built with OpenTelemetry joins the trace.
 */
export function startLegSpan(parent: Parent, stage: Stage, leg: LegInfo): Traced {
  return startTraced(stage, { kind: SpanKind.CLIENT, parent }, () => {
    const attrs = genAiRequestAttributes(leg);
    endpointAttributes(leg.endpoint, attrs);
    attrs[ATTR.stage] = stage;
    attrs[ATTR.role] = leg.role ?? stage;
    put(attrs, ATTR.mode, leg.mode);
    put(attrs, ATTR.pdGroup, leg.pdGroup);
    put(attrs, ATTR.attempt, leg.attempt);
    if (leg.item) {
      attrs[ATTR.itemIndex] = leg.item.index;
      put(attrs, ATTR.itemModality, leg.item.modality);
      put(attrs, ATTR.itemBytes, leg.item.bytes);
      put(attrs, ATTR.cacheAffinityHit, leg.item.affinity);
    }
    return attrs;
  });
}

/** `encode` for one media item; start one per item, concurrently, so the trace shows the fan-out. */
export function startEncodeSpan(parent: Parent, leg: LegInfo & { readonly item: NonNullable<LegInfo['item']> }): Traced {
  return startLegSpan(parent, 'encode', leg);
}

export function startPrefillSpan(parent: Parent, leg: LegInfo): Traced {
  return startLegSpan(parent, 'prefill', leg);
}

/** `decode` (or the only leg of a P/D-less call when `stage` is aggregated): end it when the last byte is relayed. */
export function startDecodeSpan(parent: Parent, leg: LegInfo): Traced {
  return startLegSpan(parent, 'decode', leg);
}

export interface LegOutcome extends InferenceResponseInfo {
  readonly error?: unknown;
  readonly errorType?: string;
}

/**
 * Ends a leg. A client span is an error on a transport failure or any 4xx/5xx reply; `error.type` is the given
 * type, else the error's code, else the status code.
 */
export function finishLegSpan(t: Traced, outcome: LegOutcome = {}): void {
  const span = t.span;
  if (span.isRecording()) {
    span.setAttributes(genAiResponseAttributes(outcome));
    const badStatus = outcome.statusCode !== undefined && outcome.statusCode >= 400;
    if (outcome.error !== undefined || badStatus) {
      const errorType = outcome.errorType ?? (outcome.error === undefined ? String(outcome.statusCode) : undefined);
      recordFailure(t, outcome.error ?? `engine answered ${outcome.statusCode}`, errorType ? { errorType } : {});
    }
  }
  span.end();
}

/** `finishLegSpan(t, { statusCode })` without the outcome and attribute objects: the end of every answered leg. */
export function finishLegSpanStatus(t: Traced, statusCode: number): void {
  const span = t.span;
  if (span.isRecording()) {
    span.setAttribute(ATTR.httpResponseStatusCode, statusCode);
    if (statusCode >= 400) recordFailure(t, `engine answered ${statusCode}`, { errorType: String(statusCode) });
  }
  span.end();
}

/**
 * The first streamed token of a leg: an event, and `gen_ai.response.time_to_first_chunk` in seconds since the
 * leg started.
 */
export function recordFirstToken(t: Traced): void {
  const span = t.span;
  if (!span.isRecording()) return;
  const seconds = (performance.now() - t.startedAt) / 1000;
  span.setAttribute(ATTR.genAiResponseTimeToFirstChunk, seconds);
  span.addEvent('first_token');
}

/** A failover: an event on the request span naming the attempt, the stage and why the previous one failed. */
export function recordRetry(
  t: Traced,
  info: { readonly attempt: number; readonly stage: string; readonly reason: string; readonly endpointKey?: string },
): void {
  const span = t.span;
  if (!span.isRecording()) return;
  const attrs: Attributes = { [ATTR.attempt]: info.attempt, [ATTR.stage]: info.stage, [ATTR.retryReason]: info.reason };
  put(attrs, ATTR.endpointKey, info.endpointKey);
  span.addEvent('retry', attrs);
}
