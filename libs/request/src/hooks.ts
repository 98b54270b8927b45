import type { EndpointRef, Stage } from '@triad/bus';
import type { EngineRequest, ProxyRequest, RequestContext, RoutedRequest } from './context/request-context';

/** A per-leg span handle returned by `onStageStart`. */
export interface StageSpan {
  /** Headers to add to this leg (e.g. `traceparent` of the leg's span). */
  readonly headers?: Record<string, string>;
  end(ok: boolean, status: number, error?: Error): void;
}

/**
 * Plug-in points of the request lifecycle, for tracing (libs/telemetry), admission control (libs/admission) and
 * any other integration. Every method is optional; the gateway calls them in this order for each inference
 * request, each with the narrowest context type that holds at that point:
 *
 * 1. `onRequest` — body parsed, before anything else (start the request span, read `traceparent`).
 * 2. `admit` — before routing: authenticate, rate-limit, queue. Throw a request error (`UnauthorizedError` 401,
 *    `ForbiddenError` 403, `RateLimitedError` 429 with `retryAfter`, `QueueTimeoutError` 504, …) to reject;
 *    return a Promise only when the request must wait (a queue).
 * 3. `onRouted` — the route and its target resolved (`ctx.routing`): a ModelServer or an ExternalModelProvider.
 * 4. `onScheduled` — engine targets only: decision received and the request prepared for the stage loop
 *    (`ctx.schedule`, `ctx.proxy`). A provider target has nothing to schedule and goes from `onRouted` to its legs.
 * 5. `onStageStart` per leg (encode per item, prefill, decode/aggregated, each retry) → `StageSpan.end`.
 * 6. `onFirstToken` — first response byte to the client; `onRetry` — an attempt failed and the next is tried.
 * 7. `onEnd` — exactly once for every request that reached `onRequest` (also after a rejection in `admit`):
 *    `ctx.result` holds the status, error and usage; release what `admit` took.
 */
export interface RequestHooks {
  onRequest?(ctx: RequestContext): void;
  admit?(ctx: RequestContext): void | Promise<void>;
  onRouted?(ctx: RoutedRequest): void;
  onScheduled?(ctx: EngineRequest): void;
  onStageStart?(ctx: ProxyRequest, stage: Stage, endpoint: EndpointRef, attempt: number): StageSpan | undefined;
  onFirstToken?(ctx: ProxyRequest): void;
  onRetry?(ctx: ProxyRequest, attempt: number, error: Error): void;
  onEnd?(ctx: RequestContext): void;
}

/**
 * Combines hooks into one: each lifecycle point calls them in order (admission rejections stop at the first;
 * `onEnd` runs in reverse so the outermost hook ends last). Points no hook implements stay undefined, so the
 * gateway skips them without a call.
 */
export function composeHooks(list: readonly RequestHooks[]): RequestHooks {
  if (list.length === 0) return {};
  if (list.length === 1) return list[0];
  const out: RequestHooks = {};
  const all = <K extends keyof RequestHooks>(k: K) => list.filter((h) => h[k] !== undefined);
  const onRequest = all('onRequest');
  if (onRequest.length) out.onRequest = (c) => onRequest.forEach((h) => h.onRequest?.(c));
  const admit = all('admit');
  if (admit.length) {
    out.admit = async (c) => {
      for (const h of admit) await h.admit?.(c);
    };
  }
  const onRouted = all('onRouted');
  if (onRouted.length) out.onRouted = (c) => onRouted.forEach((h) => h.onRouted?.(c));
  const onScheduled = all('onScheduled');
  if (onScheduled.length) out.onScheduled = (c) => onScheduled.forEach((h) => h.onScheduled?.(c));
  const onStageStart = all('onStageStart');
  if (onStageStart.length) {
    out.onStageStart = (c, stage, endpoint, attempt) => {
      const spans = onStageStart.map((h) => h.onStageStart?.(c, stage, endpoint, attempt)).filter((s): s is StageSpan => s !== undefined);
      if (spans.length === 0) return undefined;
      const headers: Record<string, string> = {};
      for (const s of spans) Object.assign(headers, s.headers);
      return { headers, end: (ok, status, error) => spans.forEach((s) => s.end(ok, status, error)) };
    };
  }
  const onFirstToken = all('onFirstToken');
  if (onFirstToken.length) out.onFirstToken = (c) => onFirstToken.forEach((h) => h.onFirstToken?.(c));
  const onRetry = all('onRetry');
  if (onRetry.length) out.onRetry = (c, a, e) => onRetry.forEach((h) => h.onRetry?.(c, a, e));
  const onEnd = all('onEnd').reverse();
  if (onEnd.length) out.onEnd = (c) => onEnd.forEach((h) => h.onEnd?.(c));
  return out;
}
