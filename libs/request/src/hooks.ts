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

/** The stage span of several hooks: every header on the leg, every span ended. */
function mergedSpan(spans: readonly StageSpan[]): StageSpan {
  const headers: Record<string, string> = {};
  for (const s of spans) Object.assign(headers, s.headers);
  return {
    headers,
    end: (ok, status, error) => {
      for (const s of spans) s.end(ok, status, error);
    },
  };
}

/** Runs the admit hooks from `from` on, one after the other, once one of them made the request wait. */
async function admitRest(list: readonly RequestHooks[], from: number, ctx: RequestContext, waiting: Promise<void>): Promise<void> {
  await waiting;
  for (let i = from; i < list.length; i++) await list[i].admit?.(ctx);
}

/**
 * Combines hooks into one: each lifecycle point calls them in order (admission rejections stop at the first;
 * `onEnd` runs in reverse so the outermost hook ends last). Points no hook implements stay undefined, so the
 * gateway skips them without a call. A point only one hook implements is that hook's own method, and nothing
 * allocates per call unless several hooks answer it: `admit` stays synchronous until a hook returns a Promise
 * (one that throws refuses synchronously), and a lone stage span is returned as it is.
 */
export function composeHooks(list: readonly RequestHooks[]): RequestHooks {
  if (list.length === 0) return {};
  if (list.length === 1) return list[0];
  const out: RequestHooks = {};
  const all = <K extends keyof RequestHooks>(k: K) => list.filter((h) => h[k] !== undefined);
  const single = <K extends keyof RequestHooks>(hooks: readonly RequestHooks[], k: K): RequestHooks[K] => {
    const h = hooks[0];
    return (h[k] as (...args: unknown[]) => unknown).bind(h) as RequestHooks[K];
  };
  const onRequest = all('onRequest');
  if (onRequest.length === 1) out.onRequest = single(onRequest, 'onRequest');
  else if (onRequest.length > 1)
    out.onRequest = (c) => {
      for (const h of onRequest) h.onRequest?.(c);
    };
  const admit = all('admit');
  if (admit.length === 1) out.admit = single(admit, 'admit');
  else if (admit.length > 1) {
    out.admit = (c) => {
      for (let i = 0; i < admit.length; i++) {
        const waiting = admit[i].admit?.(c);
        if (waiting !== undefined) return admitRest(admit, i + 1, c, waiting);
      }
      return undefined;
    };
  }
  const onRouted = all('onRouted');
  if (onRouted.length === 1) out.onRouted = single(onRouted, 'onRouted');
  else if (onRouted.length > 1)
    out.onRouted = (c) => {
      for (const h of onRouted) h.onRouted?.(c);
    };
  const onScheduled = all('onScheduled');
  if (onScheduled.length === 1) out.onScheduled = single(onScheduled, 'onScheduled');
  else if (onScheduled.length > 1)
    out.onScheduled = (c) => {
      for (const h of onScheduled) h.onScheduled?.(c);
    };
  const onStageStart = all('onStageStart');
  if (onStageStart.length === 1) out.onStageStart = single(onStageStart, 'onStageStart');
  else if (onStageStart.length > 1) {
    out.onStageStart = (c, stage, endpoint, attempt) => {
      let first: StageSpan | undefined;
      let more: StageSpan[] | undefined;
      for (const h of onStageStart) {
        const span = h.onStageStart?.(c, stage, endpoint, attempt);
        if (span === undefined) continue;
        if (first === undefined) first = span;
        else (more ??= [first]).push(span);
      }
      return more !== undefined ? mergedSpan(more) : first;
    };
  }
  const onFirstToken = all('onFirstToken');
  if (onFirstToken.length === 1) out.onFirstToken = single(onFirstToken, 'onFirstToken');
  else if (onFirstToken.length > 1)
    out.onFirstToken = (c) => {
      for (const h of onFirstToken) h.onFirstToken?.(c);
    };
  const onRetry = all('onRetry');
  if (onRetry.length === 1) out.onRetry = single(onRetry, 'onRetry');
  else if (onRetry.length > 1)
    out.onRetry = (c, a, e) => {
      for (const h of onRetry) h.onRetry?.(c, a, e);
    };
  const onEnd = all('onEnd').reverse();
  if (onEnd.length === 1) out.onEnd = single(onEnd, 'onEnd');
  else if (onEnd.length > 1)
    out.onEnd = (c) => {
      for (const h of onEnd) h.onEnd?.(c);
    };
  return out;
}
