import { propagation, ROOT_CONTEXT, trace, TraceFlags, type Context, type TextMapGetter, type TextMapSetter } from '@opentelemetry/api';
import { contextOf, TracedSpan, type Parent } from './spans';
import { tracing } from './state';
import { isValidSpanContext } from './tracer';

/**
 * Header shapes the helpers read: NATS `HeaderMap` (`Record<string, string>`), Node's `IncomingHttpHeaders`
 * (values may be arrays), undici response headers.
 */
export type HeaderCarrier = Readonly<Record<string, string | readonly string[] | undefined>>;

/**
 * NATS header that carries one context per request of a coalesced `triad.v1.schedule` batch (a JSON array of
 * propagator carriers, `null` where a request has no span). The standard `traceparent` of the message is the
 * first request's, so a generic consumer still sees a valid parent.
 */
export const BATCH_TRACE_HEADER = 'triad-trace-batch';

const TRACE_PARENT = 'traceparent';
const TRACE_STATE = 'tracestate';

const getter: TextMapGetter<HeaderCarrier> = {
  keys: (carrier) => Object.keys(carrier),
  get: (carrier, key) => {
    let value = carrier[key];
    if (value === undefined) {
      // HTTP header names arrive lower-cased; a NATS producer keeps whatever case it used.
      const lower = key.toLowerCase();
      for (const k of Object.keys(carrier)) {
        if (k.toLowerCase() === lower) {
          value = carrier[k];
          break;
        }
      }
    }
    if (typeof value === 'string') return value === '' ? undefined : value; // nats.js returns '' for a missing key
    if (value === undefined || value.length === 0) return undefined;
    return value as string[];
  },
};

const setter: TextMapSetter<Record<string, string>> = {
  set: (carrier, key, value) => {
    carrier[key] = value;
  },
};

/**
 * What the W3C TraceContext propagator (the only one `setupTelemetry` installs) writes for `parent`. A span these
 * helpers started gets its headers from its own ids, as the propagator spells them, without the context object the
 * API's `inject` needs (a copied Map and three closures per span, built only for this); any other parent goes
 * through the API.
 */
function inject(parent: Parent, headers: Record<string, string>): void {
  if (!(parent instanceof TracedSpan)) {
    propagation.inject(contextOf(parent), headers, setter);
    return;
  }
  const sc = parent.span.spanContext();
  if (parent.suppressed || !isValidSpanContext(sc)) return;
  headers[TRACE_PARENT] = `00-${sc.traceId}-${sc.spanId}-0${Number(sc.traceFlags || TraceFlags.NONE).toString(16)}`;
  if (sc.traceState) headers[TRACE_STATE] = sc.traceState.serialize();
}

/**
 * Writes `traceparent` (and `tracestate`) for `parent` into `headers` (created when omitted) and returns them:
 * for engine HTTP calls and for `Bus.publish/request` headers. A no-op while tracing is off.
 */
export function injectTraceHeaders(parent: Parent, headers: Record<string, string> = {}): Record<string, string> {
  if (!tracing.tracer) return headers;
  inject(parent, headers);
  return headers;
}

/**
 * Reads the W3C context from incoming headers (HTTP request or NATS `ReceiveContext.headers`) into a context
 * derived from `base` (default: the root context, so an incoming request never inherits unrelated state).
 */
export function extractTraceContext(headers: HeaderCarrier | undefined, base: Context = ROOT_CONTEXT): Context {
  if (!tracing.tracer || !headers) return base;
  return propagation.extract(base, headers, getter);
}

function hasSpan(ctx: Context | undefined): ctx is Context {
  const span = ctx ? trace.getSpan(ctx) : undefined;
  return span !== undefined && isValidSpanContext(span.spanContext());
}

/** Whether `parent`'s context holds a valid span (a span these helpers started always does, its context unbuilt). */
function parentHasSpan(parent: Parent | undefined): parent is Parent {
  if (parent === undefined) return false;
  if (parent instanceof TracedSpan) return isValidSpanContext(parent.span.spanContext());
  return hasSpan(contextOf(parent));
}

/**
 * For one NATS message that carries many requests (the scheduling batch): the first request's context in the
 * standard headers, and every request's context in `triad-trace-batch` when there is more than one, so the
 * scheduler can continue each request's own trace.
 */
export function injectBatchTraceHeaders(
  parents: readonly (Parent | undefined)[],
  headers: Record<string, string> = {},
): Record<string, string> {
  if (!tracing.tracer || parents.length === 0) return headers;
  const first = parents[0];
  if (parentHasSpan(first)) inject(first, headers);
  if (parents.length > 1 && parents.some(parentHasSpan)) {
    const carriers = parents.map((p) => {
      if (!parentHasSpan(p)) return null;
      const carrier: Record<string, string> = {};
      inject(p, carrier);
      return carrier;
    });
    headers[BATCH_TRACE_HEADER] = JSON.stringify(carriers);
  }
  return headers;
}

function parseBatch(raw: string | undefined): unknown[] | undefined {
  if (!raw) return undefined;
  try {
    const parsed: unknown = JSON.parse(raw);
    return Array.isArray(parsed) ? parsed : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The parent context of each of `count` requests in a batch message, in order. Without the batch header the
 * standard headers belong to request 0 and the others start their own traces.
 */
export function extractBatchTraceContexts(headers: HeaderCarrier | undefined, count: number): Context[] {
  const out: Context[] = new Array<Context>(count).fill(ROOT_CONTEXT);
  if (!tracing.tracer || !headers || count === 0) return out;
  const raw = getter.get(headers, BATCH_TRACE_HEADER);
  const batch = parseBatch(Array.isArray(raw) ? raw[0] : raw);
  if (!batch) {
    out[0] = extractTraceContext(headers);
    return out;
  }
  for (let i = 0; i < count && i < batch.length; i++) {
    const entry = batch[i];
    if (!entry || typeof entry !== 'object') continue;
    // Only string values: the header came over the wire and is not trusted to have the right shape.
    const carrier: Record<string, string> = {};
    for (const [k, v] of Object.entries(entry)) if (typeof v === 'string') carrier[k] = v;
    out[i] = propagation.extract(ROOT_CONTEXT, carrier, getter);
  }
  return out;
}
