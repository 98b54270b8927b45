import type { Span } from '@opentelemetry/api';
import type { Decision, EndpointRef, Stage } from '@triad/bus';
import {
  RequestLocal,
  failedStageOf,
  type EngineRequest,
  type ProxyRequest,
  type RequestContext,
  type RequestHooks,
  type RoutedRequest,
  type StageSpan,
} from '@triad/request';
import {
  finishLegSpan,
  finishLegSpanStatus,
  finishRequestSpan,
  finishRouteSpan,
  finishScheduleSpan,
  recordFirstToken,
  recordRetry,
  startLegSpan,
  startRequestSpan,
  startRouteSpan,
  startScheduleSpan,
  type LegInfo,
  type RequestOutcome,
} from './gateway-spans';
import { ATTR } from './attributes';
import { injectTraceHeaders } from './propagation';
import { endTraced, errorTypeOf, traceIdOf, type Traced } from './spans';
import { RecordedSpan } from './tracer';

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

// The gateway's request-lifecycle hooks (`RequestHooks` of @triad/request) as spans.

/** Per-request tracing state. */
const TRACE = new RequestLocal<RequestTrace>('triad.trace');

interface RequestTrace {
  readonly request: Traced;
  route: Traced | undefined;
  schedule: Traced | undefined;
  decision: Decision | undefined;
  /** Encoder choices not yet matched to an encode leg (to recover each leg's media item). */
  unmatchedEncoders: Decision['encoders'];
  /** The leg that streams to the client (decode or aggregated), for the first-token event. */
  streaming: Traced | undefined;
}

/**
 * The GenAI operation of an inference path (the path itself for any other). A switch, not a lookup table: the path is
 * a string the HTTP parser made, and a table indexed by it is a megamorphic keyed load that first finds the key in
 * the string table (several hundred instructions, four times a request).
 */
function operationOf(path: string): string {
  switch (path) {
    case '/v1/chat/completions':
      return 'chat';
    case '/v1/completions':
      return 'text_completion';
    case '/v1/embeddings':
      return 'embeddings';
    default:
      return path;
  }
}

/** The name part of a `namespace/name` route ('' without one): its second `/`-separated part, as `split` gives it. */
function routeName(qualified: string): string {
  const slash = qualified.indexOf('/');
  if (slash < 0) return '';
  const end = qualified.indexOf('/', slash + 1);
  return end < 0 ? qualified.slice(slash + 1) : qualified.slice(slash + 1, end);
}

/** A leg's span as the stage loop holds it: its trace headers, and `end` (a method, not a closure per leg). */
class LegStageSpan implements StageSpan {
  constructor(
    readonly leg: Traced,
    readonly headers: Record<string, string>,
  ) {}

  end(ok: boolean, status: number, error?: Error): void {
    if (ok) finishLegSpanStatus(this.leg, status);
    else finishLegSpan(this.leg, { ...(status > 0 ? { statusCode: status } : {}), error: error ?? `HTTP ${status}` });
  }
}

/** The request's trace id (for the access log and the `x-triad-trace-id` header), once `onRequest` ran. */
export function requestTraceId(ctx: RequestContext): string | undefined {
  const state = TRACE.get(ctx);
  if (state === undefined) return undefined;
  // A span the recorder made holds valid ids by construction (its own, or a parent's that was checked).
  const span = state.request.span;
  return span instanceof RecordedSpan ? span.ids.traceId : traceIdOf(state.request);
}

/** The `schedule` span to inject into the scheduling batch (`injectBatchTraceHeaders`), while it is open. */
export function scheduleSpanOf(ctx: RequestContext): Traced | undefined {
  return TRACE.get(ctx)?.schedule;
}

/**
 * The request (SERVER) span, for events other integrations add under it (admission's `triad.admission.*`, via
 * `createAdmissionHooks({ spanOf: requestSpanOf })`); undefined before `onRequest` and when it is not recording.
 */
export function requestSpanOf(ctx: RequestContext): Span | undefined {
  const span = TRACE.get(ctx)?.request.span;
  return span?.isRecording() ? span : undefined;
}

/**
 * Tracing as gateway lifecycle hooks: the request span from `onRequest` to `onEnd`; `route` until `onRouted`
 * (it includes admission until the gateway has a hook between the two); `schedule` until `onScheduled`; one
 * leg span per `onStageStart`, whose `traceparent` rides on that leg. Install only when tracing is enabled
 * (`telemetry.enabled`): the gateway then skips every hook point and tracing costs nothing.
 */
export function createGatewayTracingHooks() {
  return {
    onRequest(ctx: RequestContext): void {
      const request = startRequestSpan({ method: ctx.method, route: ctx.path, headers: ctx.headers, requestId: ctx.id });
      TRACE.set(ctx, {
        request,
        route: startRouteSpan(request, { model: ctx.model }),
        schedule: undefined,
        decision: undefined,
        unmatchedEncoders: [],
        streaming: undefined,
      });
    },

    onRouted(ctx: RoutedRequest): void {
      const state = TRACE.get(ctx);
      if (!state) return;
      const server = ctx.routing.server;
      if (state.route) {
        const modelRoute = routeName(ctx.routing.route);
        finishRouteSpan(
          state.route,
          modelRoute
            ? { namespace: server.namespace, modelServer: server.name, modelRoute }
            : { namespace: server.namespace, modelServer: server.name },
          state.request,
        );
        state.route = undefined;
      }
      // Only a ModelServer is scheduled; a provider target goes from routing to its call.
      if (server.kind === 'engine')
        state.schedule = startScheduleSpan(state.request, { namespace: server.namespace, modelServer: server.name });
    },

    onScheduled(ctx: EngineRequest): void {
      const state = TRACE.get(ctx);
      if (!state) return;
      const decision = ctx.proxy.decision;
      state.decision = decision;
      state.unmatchedEncoders = [...decision.encoders];
      if (state.schedule) finishScheduleSpan(state.schedule, decision, { local: ctx.schedule?.local ?? false });
      state.schedule = undefined;
      if (state.request.span.isRecording()) state.request.span.setAttribute(ATTR.mode, decision.mode);
    },

    onStageStart(ctx: ProxyRequest, stage: Stage, endpoint: EndpointRef, attempt: number): StageSpan | undefined {
      const state = TRACE.get(ctx);
      if (!state) return undefined;
      let item: { index: number; affinity: boolean } | undefined;
      if (stage === 'encode') {
        const i = state.unmatchedEncoders.findIndex((e) => e.endpoint.key === endpoint.key);
        const choice = i >= 0 ? state.unmatchedEncoders.splice(i, 1)[0] : undefined;
        if (choice) item = { index: choice.item, affinity: choice.affinity };
      }
      // One object per leg, its optional fields set in place (no spread of a temporary object per field).
      const info: Mutable<LegInfo> = {
        // Legs carry the model the engine is sent; the request span keeps the one the client named.
        operation: operationOf(ctx.path),
        // An ExternalModelProvider target names its API (`openai`, `anthropic`), an engine its kind.
        engine: ctx.routing.server.kind === 'provider' ? ctx.routing.server.api : ctx.routing.server.engine,
        model: ctx.routing.upstreamModel || ctx.model,
        endpoint,
        attempt,
      };
      if (state.decision) info.mode = state.decision.mode;
      if (item) info.item = item;
      if (stage === 'prefill') info.maxTokens = 1;
      else if (stage !== 'encode') info.stream = ctx.stream;
      const leg = startLegSpan(state.request, stage, info);
      if (stage === 'decode' || stage === 'aggregated') state.streaming = leg;
      return new LegStageSpan(leg, injectTraceHeaders(leg));
    },

    onFirstToken(ctx: ProxyRequest): void {
      const state = TRACE.get(ctx);
      if (state?.streaming) recordFirstToken(state.streaming);
    },

    onRetry(ctx: ProxyRequest, attempt: number, error: Error): void {
      const state = TRACE.get(ctx);
      if (!state) return;
      recordRetry(state.request, { attempt, stage: failedStageOf(error) ?? 'unknown', reason: errorTypeOf(error) });
    },

    onEnd(ctx: RequestContext): void {
      const state = TRACE.get(ctx);
      if (!state) return;
      const { status, error, usage, resumes, resumeRefused } = ctx.result;
      // A request rejected before routing or scheduling still closes those spans, failed with the request's error.
      if (state.route) endTraced(state.route, error ?? `HTTP ${status}`);
      if (state.schedule) endTraced(state.schedule, error ?? `HTTP ${status}`);
      // Engine-leg and placement errors name their stage: `triad.failed_stage`.
      const failedStage = failedStageOf(error);
      // One object, its optional fields set in place (no spread of a temporary object per field).
      const outcome: Mutable<RequestOutcome> = { statusCode: status, requestModel: ctx.model, operation: operationOf(ctx.path) };
      if (usage) outcome.response = { inputTokens: usage.promptTokens, outputTokens: usage.completionTokens };
      if (error) outcome.error = error;
      if (failedStage !== undefined) outcome.failedStage = failedStage;
      if (ctx.result.stageFallbacks.length > 0) outcome.stageFallbacks = ctx.result.stageFallbacks.map((f) => `${f.stage}:${f.reason}`);
      if (resumes > 0) outcome.streamResumes = resumes;
      if (resumeRefused !== undefined) outcome.streamResumeRefused = resumeRefused;
      finishRequestSpan(state.request, outcome);
    },
  } satisfies RequestHooks;
}
