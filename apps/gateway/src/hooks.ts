import type { Decision, EndpointRef, Stage } from '@triad/bus';
import type { Usage } from '@triad/connectors';

/**
 * What a hook sees of a request. One object per request, shared by every hook; `locals` is where a hook keeps
 * its own per-request state (a span, an admission ticket) under its own key.
 */
export interface HookRequest {
  readonly id: string;
  readonly method: string;
  /** Request path without the query, e.g. `/v1/chat/completions`. */
  readonly path: string;
  /** Incoming headers (lower-case names), e.g. `authorization`, `traceparent`. */
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  /** Model name as the client sent it. */
  readonly model: string;
  /** The parsed body (read-only by convention: hooks must not change what the engines get). */
  readonly body: Readonly<Record<string, unknown>>;
  readonly stream: boolean;
  /** Estimated prompt tokens (characters / 4 of the text parts), for rate limits before the engine answers. */
  readonly inputTokens: number;
  /** ModelRoute `ns/name` and ModelServer `ns/name`, set once routed. */
  route: string | undefined;
  modelServer: string | undefined;
  /** The model the engines get (ModelServer `spec.model`, or the request model for a LoRA adapter); '' until routed. */
  upstreamModel: string;
  /** Extra headers for every engine leg (trace context from a tracing hook). */
  readonly upstreamHeaders: Record<string, string>;
  /** Set by the tracing integration in `onRequest`: answered as `x-triad-trace-id` and logged as `trace_id`. */
  traceId: string | undefined;
  readonly locals: Record<string, unknown>;
  /** Aborted when the client goes away (a queued request leaves its queue). Created on first use. */
  readonly signal: AbortSignal;
}

/** How a request ended, given to `onEnd`. */
export interface HookOutcome {
  /** HTTP status the client got (499 when it went away). */
  readonly status: number;
  readonly error: Error | undefined;
  /** Token counts from the engine's usage, when it reported them. */
  readonly usage: Usage | undefined;
  readonly durationMs: number;
}

/** A per-leg span handle returned by `onStageStart`. */
export interface StageSpan {
  /** Headers to add to this leg (e.g. `traceparent` of the leg's span). */
  readonly headers?: Record<string, string>;
  end(ok: boolean, status: number, error?: Error): void;
}

/**
 * Plug-in points of the request lifecycle, for tracing (libs/telemetry) and admission control (libs/admission).
 * Every method is optional; the gateway calls them in this order for each inference request:
 *
 * 1. `onRequest` — body parsed, before anything else (start the request span, read `traceparent`).
 * 2. `admit` — before routing: authenticate, rate-limit, queue. Throw a TriadError (GATEWAY_UNAUTHORIZED 401,
 *    GATEWAY_FORBIDDEN 403, GATEWAY_RATE_LIMITED 429 with `details.retryAfterSeconds`, GATEWAY_QUEUE_TIMEOUT
 *    504) to reject; return a Promise only when the request must wait (a queue).
 * 3. `onRouted` — ModelRoute and ModelServer resolved (`route`, `modelServer` set).
 * 4. `onScheduled` — decision received (`local` = decided by the gateway's fallback).
 * 5. `onStageStart` per engine leg (encode per item, prefill, decode/aggregated, each retry) → `StageSpan.end`.
 * 6. `onFirstToken` — first response byte to the client; `onRetry` — an attempt failed and the next is tried.
 * 7. `onEnd` — exactly once for every request that reached `onRequest` (also after a rejection in `admit`):
 *    release what `admit` took, with the real usage.
 */
export interface RequestHooks {
  onRequest?(req: HookRequest): void;
  admit?(req: HookRequest): void | Promise<void>;
  onRouted?(req: HookRequest): void;
  onScheduled?(req: HookRequest, decision: Decision, local: boolean): void;
  onStageStart?(req: HookRequest, stage: Stage, endpoint: EndpointRef, attempt: number): StageSpan | undefined;
  onFirstToken?(req: HookRequest): void;
  onRetry?(req: HookRequest, attempt: number, error: Error): void;
  onEnd?(req: HookRequest, outcome: HookOutcome): void;
}

/**
 * Combines hooks into one: each lifecycle point calls them in order (admission rejections stop at the first;
 * `onEnd` runs in reverse so the outermost hook ends last). Points no hook implements stay undefined, so the
 * gateway skips them without a call.
 */
export function composeHooks(list: readonly RequestHooks[]): RequestHooks {
  if (list.length === 0) return {};
  if (list.length === 1) return list[0] as RequestHooks;
  const out: RequestHooks = {};
  const all = <K extends keyof RequestHooks>(k: K) => list.filter((h) => h[k] !== undefined);
  const onRequest = all('onRequest');
  if (onRequest.length) out.onRequest = (r) => onRequest.forEach((h) => h.onRequest?.(r));
  const admit = all('admit');
  if (admit.length) {
    out.admit = async (r) => {
      for (const h of admit) await h.admit?.(r);
    };
  }
  const onRouted = all('onRouted');
  if (onRouted.length) out.onRouted = (r) => onRouted.forEach((h) => h.onRouted?.(r));
  const onScheduled = all('onScheduled');
  if (onScheduled.length) out.onScheduled = (r, d, l) => onScheduled.forEach((h) => h.onScheduled?.(r, d, l));
  const onStageStart = all('onStageStart');
  if (onStageStart.length) {
    out.onStageStart = (r, stage, endpoint, attempt) => {
      const spans = onStageStart.map((h) => h.onStageStart?.(r, stage, endpoint, attempt)).filter((s): s is StageSpan => s !== undefined);
      if (spans.length === 0) return undefined;
      return {
        headers: Object.assign({}, ...spans.map((s) => s.headers ?? {})) as Record<string, string>,
        end: (ok, status, error) => spans.forEach((s) => s.end(ok, status, error)),
      };
    };
  }
  const onFirstToken = all('onFirstToken');
  if (onFirstToken.length) out.onFirstToken = (r) => onFirstToken.forEach((h) => h.onFirstToken?.(r));
  const onRetry = all('onRetry');
  if (onRetry.length) out.onRetry = (r, a, e) => onRetry.forEach((h) => h.onRetry?.(r, a, e));
  const onEnd = all('onEnd').reverse();
  if (onEnd.length) out.onEnd = (r, o) => onEnd.forEach((h) => h.onEnd?.(r, o));
  return out;
}
