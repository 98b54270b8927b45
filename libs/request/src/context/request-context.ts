import type { ClientSink } from '../client-sink';
import {
  RequestResult,
  type EngineProxyPart,
  type EngineRouting,
  type ProviderProxyPart,
  type ProviderRouting,
  type ProxyPart,
  type RoutingPart,
  type SchedulePart,
} from './parts';

/** Incoming request headers (lower-case names), as node parses them. */
export type IncomingHeaders = Readonly<Record<string, string | string[] | undefined>>;

/** Something in flight for the request that the client's departure must stop (the stage loop). */
export interface Abortable {
  abort(reason: Error): void;
}

/**
 * One client request from arrival to the last byte: what routing, admission, scheduling, the stage loop and
 * telemetry read and write. The arrival facts are fixed at construction; each later part has one owner, which
 * records it once through a method, and a narrower type says which parts are there:
 *
 * - `routing` (route resolution, `routed`) → {@link RoutedRequest}, narrowed to the target's kind
 *   ({@link EngineRouting} or {@link ProviderRouting});
 * - `schedule` (scheduling, `scheduled`; engine targets only);
 * - `proxy` (the gateway, `prepared`) → {@link ProxyRequest}, what the stage loop and its observers get;
 *   {@link EngineRequest} and {@link ProviderRequest} are what the two kinds of connector get;
 * - `result` (the stage loop; the gateway for failures before it);
 * - `traceId` (the tracing integration), `upstreamHeaders` (any hook adding headers to every leg);
 * - integration state in {@link RequestLocal} slots (a span, an admission ticket).
 */
export class RequestContext {
  /** x-request-id; the same id goes to prefill and decode, encoders get `id:i:hex`. */
  readonly id: string;
  readonly method: string;
  /** Request path without the query, e.g. `/v1/chat/completions`. */
  readonly path: string;
  /** Incoming headers (lower-case names), e.g. `authorization`, `traceparent`. */
  readonly headers: IncomingHeaders;
  /** The parsed body; only routing changes it (the `model` rewrite), connectors never do. */
  readonly body: Record<string, unknown>;
  /** Model name as the client sent it ('' when the body did not parse). */
  readonly model: string;
  /** The client asked for a stream. */
  readonly stream: boolean;
  /** The prompt text prefix hashing and the input-token estimate use ('' for other paths). */
  readonly prompt: string;
  /** Estimated prompt tokens, for rate limits and the scheduler before the engine answers. */
  readonly inputTokens: number;
  /** Arrival (`performance.now()`); the total timeout counts from here. */
  readonly receivedAt: number;
  readonly sink: ClientSink;
  /** Headers forwarded to every leg (authorization, trace context), lower-case names; hooks may add to it. */
  readonly upstreamHeaders: Record<string, string>;
  readonly result = new RequestResult();
  /** The values of {@link RequestLocal} slots, by slot index (integration state: a span, an admission ticket). */
  readonly locals: unknown[] = [];
  /** Set by the tracing integration in `onRequest`: answered as `x-triad-trace-id` and logged as `trace_id`. */
  traceId: string | undefined = undefined;
  #routing: RoutingPart | undefined = undefined;
  #schedule: SchedulePart | undefined = undefined;
  #proxy: ProxyPart | undefined = undefined;
  #abortController: AbortController | undefined = undefined;
  #inFlight: Abortable | undefined = undefined;

  constructor(
    id: string,
    method: string,
    path: string,
    headers: IncomingHeaders,
    body: Record<string, unknown>,
    prompt: string,
    inputTokens: number,
    receivedAt: number,
    sink: ClientSink,
    upstreamHeaders: Record<string, string>,
  ) {
    this.id = id;
    this.method = method;
    this.path = path;
    this.headers = headers;
    this.body = body;
    const model = body['model'];
    this.model = typeof model === 'string' ? model : '';
    this.stream = body['stream'] === true;
    this.prompt = prompt;
    this.inputTokens = inputTokens;
    this.receivedAt = receivedAt;
    this.sink = sink;
    this.upstreamHeaders = upstreamHeaders;
  }

  get routing(): RoutingPart | undefined {
    return this.#routing;
  }

  get schedule(): SchedulePart | undefined {
    return this.#schedule;
  }

  get proxy(): ProxyPart | undefined {
    return this.#proxy;
  }

  /** Route resolution records the target it resolved to: from here on the request is routed to that kind of target. */
  routed<R extends RoutingPart>(part: R): asserts this is RequestContext & { readonly routing: R } {
    this.#routing = part;
  }

  /** Scheduling records its answer, a failed decision included. */
  scheduled(part: SchedulePart): void {
    this.#schedule = part;
  }

  /** The gateway hands the request to the stage loop: from here on it is a {@link ProxyRequest} with `part`. */
  prepared<P extends ProxyPart>(this: RoutedRequest, part: P): asserts this is RoutedRequest & { readonly proxy: P } {
    this.#proxy = part;
  }

  /** Aborted when the client goes away (a queued request leaves its queue). Created on first use. */
  get signal(): AbortSignal {
    this.#abortController ??= new AbortController();
    if (this.sink.destroyed && !this.#abortController.signal.aborted) this.#abortController.abort();
    return this.#abortController.signal;
  }

  /** The stage loop registers itself, so {@link clientGone} also aborts the legs in flight. */
  attach(inFlight: Abortable): void {
    this.#inFlight = inFlight;
  }

  /** The client closed the connection before the answer was complete: abort legs and anyone waiting. */
  clientGone(reason: Error): void {
    this.#abortController?.abort(reason);
    this.#inFlight?.abort(reason);
  }
}

/** A request whose route resolved to a target (`onRouted` and later). */
export type RoutedRequest = RequestContext & { readonly routing: RoutingPart };

/** A request the stage loop runs: routed and prepared (stage hooks and observers). */
export type ProxyRequest = RoutedRequest & { readonly proxy: ProxyPart };

/** A request routed to a ModelServer, scheduled and prepared: what engine connectors and `onScheduled` get. */
export type EngineRequest = RequestContext & { readonly routing: EngineRouting; readonly proxy: EngineProxyPart };

/** A request routed to an ExternalModelProvider and prepared: what provider connectors get. */
export type ProviderRequest = RequestContext & { readonly routing: ProviderRouting; readonly proxy: ProviderProxyPart };

/** Whether route resolution has recorded the request's target. */
export function isRouted(ctx: RequestContext): ctx is RoutedRequest {
  return ctx.routing !== undefined;
}
