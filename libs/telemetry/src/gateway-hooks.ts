import type { Span } from '@opentelemetry/api';
import type { Decision, EndpointRef, Stage } from '@triad/bus';
import {
  finishLegSpan, finishRequestSpan, finishRouteSpan, finishScheduleSpan, recordFirstToken, recordRetry, startLegSpan, startRequestSpan,
  startRouteSpan, startScheduleSpan,
} from './gateway-spans';
import { ATTR } from './attributes';
import { injectTraceHeaders } from './propagation';
import { endTraced, errorTypeOf, traceIdOf, type Traced } from './spans';

// Adapter from the gateway's request-lifecycle hooks (apps/gateway `RequestHooks`) to the span helpers. The
// types below are the structural subset of the gateway's hook arguments this adapter reads, so libs/telemetry
// does not depend on the app; the gateway's `composeHooks([createGatewayTracingHooks(...)])` type-checks it.

/** What the adapter reads of the gateway's `HookRequest`. */
export interface TracedHookRequest {
  readonly id: string;
  readonly method: string;
  readonly path: string;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly model: string;
  readonly stream: boolean;
  readonly route: string | undefined;
  readonly modelServer: string | undefined;
  /** The model the engines get once routed (the route may rewrite the client's name); '' or absent before. */
  readonly upstreamModel?: string;
  readonly locals: Record<string, unknown>;
}

export interface TracedHookOutcome {
  readonly status: number;
  readonly error: Error | undefined;
  readonly usage: { readonly promptTokens: number; readonly completionTokens: number } | undefined;
}

/** The per-leg handle the gateway's `onStageStart` returns. */
export interface TracedStageSpan {
  readonly headers?: Record<string, string>;
  end(ok: boolean, status: number, error?: Error): void;
}

export interface GatewayTracingOptions {
  /** `vLLM` / `SGLang` of the request's ModelServer (for `gen_ai.provider.name`); `unknown` when omitted. */
  readonly engineOf?: (req: TracedHookRequest) => string | undefined;
}

/** Per-request tracing state, kept in `req.locals` under this key. */
export const TRACE_LOCALS_KEY = 'triad.trace';

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

const OPERATIONS: Record<string, string> = {
  '/v1/chat/completions': 'chat', '/v1/completions': 'text_completion', '/v1/embeddings': 'embeddings',
};

function stateOf(req: TracedHookRequest): RequestTrace | undefined {
  return req.locals[TRACE_LOCALS_KEY] as RequestTrace | undefined;
}

function splitName(qualified: string | undefined): { namespace: string; name: string } {
  const [namespace = '', name = ''] = (qualified ?? '/').split('/');
  return { namespace, name };
}

/** The request's trace id (for the access log and the `x-triad-trace-id` header), once `onRequest` ran. */
export function requestTraceId(req: { readonly locals: Record<string, unknown> }): string | undefined {
  const state = req.locals[TRACE_LOCALS_KEY] as RequestTrace | undefined;
  return state ? traceIdOf(state.request) : undefined;
}

/** The `schedule` span to inject into the scheduling batch (`injectBatchTraceHeaders`), while it is open. */
export function scheduleSpanOf(req: { readonly locals: Record<string, unknown> }): Traced | undefined {
  return (req.locals[TRACE_LOCALS_KEY] as RequestTrace | undefined)?.schedule;
}

/**
 * The request (SERVER) span, for events other integrations add under it (admission's `triad.admission.*`, via
 * `createAdmissionHooks({ spanOf: requestSpanOf })`); undefined before `onRequest` and when it is not recording.
 */
export function requestSpanOf(req: { readonly locals: Record<string, unknown> }): Span | undefined {
  const span = (req.locals[TRACE_LOCALS_KEY] as RequestTrace | undefined)?.request.span;
  return span?.isRecording() ? span : undefined;
}

/**
 * Tracing as gateway lifecycle hooks: the request span from `onRequest` to `onEnd`; `route` until `onRouted`
 * (it includes admission until the gateway has a hook between the two); `schedule` until `onScheduled`; one
 * leg span per `onStageStart`, whose `traceparent` rides on that leg. Install only when tracing is enabled
 * (`telemetry.enabled`): the gateway then skips every hook point and tracing costs nothing.
 */
export function createGatewayTracingHooks(options: GatewayTracingOptions = {}) {
  return {
    onRequest(req: TracedHookRequest): void {
      const request = startRequestSpan({ method: req.method, route: req.path, headers: req.headers, requestId: req.id });
      const state: RequestTrace = {
        request, route: startRouteSpan(request, { model: req.model }), schedule: undefined, decision: undefined, unmatchedEncoders: [], streaming: undefined,
      };
      req.locals[TRACE_LOCALS_KEY] = state;
    },

    onRouted(req: TracedHookRequest): void {
      const state = stateOf(req);
      if (!state) return;
      const server = splitName(req.modelServer);
      if (state.route) {
        const route = splitName(req.route);
        finishRouteSpan(state.route, { namespace: server.namespace, modelServer: server.name, ...(route.name ? { modelRoute: route.name } : {}) }, state.request);
        state.route = undefined;
      }
      state.schedule = startScheduleSpan(state.request, { namespace: server.namespace, modelServer: server.name });
    },

    onScheduled(req: TracedHookRequest, decision: Decision, local: boolean): void {
      const state = stateOf(req);
      if (!state) return;
      state.decision = decision;
      state.unmatchedEncoders = [...decision.encoders];
      if (state.schedule) finishScheduleSpan(state.schedule, decision, { local });
      state.schedule = undefined;
      if (state.request.span.isRecording()) state.request.span.setAttribute(ATTR.mode, decision.mode);
    },

    onStageStart(req: TracedHookRequest, stage: Stage, endpoint: EndpointRef, attempt: number): TracedStageSpan | undefined {
      const state = stateOf(req);
      if (!state) return undefined;
      let item: { index: number; affinity: boolean } | undefined;
      if (stage === 'encode') {
        const i = state.unmatchedEncoders.findIndex((e) => e.endpoint.key === endpoint.key);
        const choice = i >= 0 ? state.unmatchedEncoders.splice(i, 1)[0] : undefined;
        if (choice) item = { index: choice.item, affinity: choice.affinity };
      }
      const leg = startLegSpan(state.request, stage, {
        // Legs carry the model the engine is sent; the request span keeps the one the client named.
        operation: OPERATIONS[req.path] ?? req.path, engine: options.engineOf?.(req) ?? 'unknown', model: req.upstreamModel || req.model, endpoint, attempt,
        ...(state.decision ? { mode: state.decision.mode } : {}),
        ...(item ? { item } : {}),
        ...(stage === 'prefill' ? { maxTokens: 1 } : stage === 'encode' ? {} : { stream: req.stream }),
      });
      if (stage === 'decode' || stage === 'aggregated') state.streaming = leg;
      return {
        headers: injectTraceHeaders(leg),
        end: (ok, status, error) => finishLegSpan(leg, ok ? { statusCode: status } : { ...(status > 0 ? { statusCode: status } : {}), error: error ?? `HTTP ${status}` }),
      };
    },

    onFirstToken(req: TracedHookRequest): void {
      const state = stateOf(req);
      if (state?.streaming) recordFirstToken(state.streaming);
    },

    onRetry(req: TracedHookRequest, attempt: number, error: Error): void {
      const state = stateOf(req);
      if (!state) return;
      const stage = (error as { details?: { stage?: string } }).details?.stage ?? 'unknown';
      recordRetry(state.request, { attempt, stage, reason: errorTypeOf(error) });
    },

    onEnd(req: TracedHookRequest, outcome: TracedHookOutcome): void {
      const state = stateOf(req);
      if (!state) return;
      // A request rejected before routing or scheduling still closes those spans, failed with the request's error.
      if (state.route) endTraced(state.route, outcome.error ?? `HTTP ${outcome.status}`);
      if (state.schedule) endTraced(state.schedule, outcome.error ?? `HTTP ${outcome.status}`);
      // Engine-leg errors (libs/connectors) name their stage in `details.stage`: `triad.failed_stage`.
      const failedStage = (outcome.error as { details?: { stage?: unknown } } | undefined)?.details?.stage;
      finishRequestSpan(state.request, {
        statusCode: outcome.status,
        requestModel: req.model,
        operation: OPERATIONS[req.path] ?? req.path,
        ...(outcome.usage ? { response: { inputTokens: outcome.usage.promptTokens, outputTokens: outcome.usage.completionTokens } } : {}),
        ...(outcome.error ? { error: outcome.error } : {}),
        ...(typeof failedStage === 'string' ? { failedStage } : {}),
      });
    },
  };
}
