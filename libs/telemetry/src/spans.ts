import {
  context as otelContext,
  INVALID_SPAN_CONTEXT,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  TraceFlags,
  type Attributes,
  type Context,
  type Link,
  type Span,
  type SpanContext,
  type TimeInput,
} from '@opentelemetry/api';
import { isTriadError } from '@triad/errors';
import { ATTR } from './attributes';
import { tracing } from './state';
import { epochOf, isValidSpanContext } from './tracer';

/** A started span together with the context that holds it (parent of its children, source of outgoing headers). */
export interface Traced {
  readonly span: Span;
  readonly context: Context;
  /** `performance.now()` at start, for derived durations such as time to first chunk. */
  readonly startedAt: number;
}

/** Where a span hangs: a started span or a context (e.g. one extracted from NATS or HTTP headers). */
export type Parent = Traced | Context;

/** Returned by every helper while tracing is off: never recording, no context, shared (no allocation). */
export const NOOP_TRACED: Traced = Object.freeze({
  span: trace.wrapSpanContext(INVALID_SPAN_CONTEXT),
  context: ROOT_CONTEXT,
  startedAt: 0,
});

function isTraced(p: Parent): p is Traced {
  return (p as Traced).span !== undefined && (p as Traced).startedAt !== undefined;
}

export function contextOf(parent: Parent): Context {
  return isTraced(parent) ? parent.context : parent;
}

export interface StartOptions {
  readonly kind?: SpanKind;
  /** Parent span or context; defaults to the active context. */
  readonly parent?: Parent;
  /** Start a new trace (pod-watcher passes, background work). */
  readonly root?: boolean;
  readonly links?: Link[];
  /** When the work began, if before this call (epoch ms or `Date`), e.g. a stage only known once it ended. */
  readonly startTime?: TimeInput;
}

/** `suppressTracing`'s context key in @opentelemetry/core (`createContextKey` is `Symbol.for` of its description). */
const SUPPRESS_TRACING_KEY = Symbol.for('OpenTelemetry SDK Context Key SUPPRESS_TRACING');

/** Whether the context a span starts under suppresses tracing (what the W3C propagator checks before injecting). */
function suppressedUnder(parent: Parent): boolean {
  if (parent instanceof TracedSpan) return parent.suppressed;
  return contextOf(parent).getValue(SUPPRESS_TRACING_KEY) === true;
}

/** A started span; its context (parent of non-Triad code, source of headers via the API) is built on first use. */
export class TracedSpan implements Traced {
  #context: Context | undefined;
  readonly #parent: Parent;
  /**
   * Its context suppresses tracing (inherited from the parent it started under), so a propagator injects nothing
   * for it. Known without building the context, so trace headers can be written from the span's own ids.
   */
  readonly suppressed: boolean;

  constructor(
    readonly span: Span,
    readonly startedAt: number,
    parent: Parent,
  ) {
    this.#parent = parent;
    this.suppressed = suppressedUnder(parent);
  }

  get context(): Context {
    return (this.#context ??= trace.setSpan(contextOf(this.#parent), this.span));
  }
}

/**
 * The span context a child of `parent` continues, or undefined for a new trace. A `Traced` made by these helpers
 * always holds a valid context (except the shared no-op); any other context is checked.
 */
function spanContextOf(parent: Parent): SpanContext | undefined {
  if (isTraced(parent)) return parent === NOOP_TRACED ? undefined : parent.span.spanContext();
  const sc = trace.getSpanContext(parent);
  return sc !== undefined && isValidSpanContext(sc) ? sc : undefined;
}

/**
 * Starts a span. `attributes` is a function so nothing is built unless the span records (sampled and tracing
 * on); the sampler never needs them (Triad's samplers look at the trace id and parent only). The function must
 * not put `undefined` values in the object (use `put`): the span keeps the object as built.
 */
export function startTraced(name: string, options: StartOptions = {}, attributes?: () => Attributes): Traced {
  const tracer = tracing.tracer;
  if (!tracer) return NOOP_TRACED;
  let parent: Parent = ROOT_CONTEXT;
  let parentSc: SpanContext | undefined;
  if (!options.root) {
    parent = options.parent ?? otelContext.active();
    parentSc = spanContextOf(parent);
    if (parentSc !== undefined && !parentSc.isRemote && (parentSc.traceFlags & TraceFlags.SAMPLED) === 0) {
      // A local unsampled parent was dropped by this process's own sampler, which drops its children too
      // (parent-based samplers by rule, ratio samplers by the shared trace id, always_off always). So skip minting
      // span ids nobody records: the parent stands in, and ending or annotating it is a no-op. Downstream still
      // gets this trace id with the sampled flag cleared. (A remote parent is left to the sampler: always_on or a
      // ratio sampler may record under an unsampled caller.)
      return isTraced(parent) ? parent : { span: trace.getSpan(parent) as Span, context: parent, startedAt: performance.now() };
    }
  }
  const startMs = options.startTime === undefined ? undefined : epochOf(options.startTime);
  const span = tracer.begin(name, options.kind ?? SpanKind.INTERNAL, parentSc, startMs, attributes, options.links);
  return new TracedSpan(span, performance.now(), parent);
}

/** Sets attributes built by `build` only when the span records. */
export function setAttributes(t: Traced, build: () => Attributes): void {
  if (t.span.isRecording()) t.span.setAttributes(build());
}

/** Adds an event (attributes built only when recording). */
export function addEvent(t: Traced, name: string, build?: () => Attributes): void {
  if (t.span.isRecording()) t.span.addEvent(name, build ? build() : undefined);
}

/**
 * A low-cardinality `error.type`: the TriadError code, else a Node error code (`ECONNREFUSED`), else the error
 * class name, else `_OTHER` (the convention's fallback).
 */
export function errorTypeOf(err: unknown): string {
  if (isTriadError(err)) return err.code;
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code;
    if (typeof code === 'string' && code) return code;
    if (err.name && err.name !== 'Error') return err.name;
  }
  return '_OTHER';
}

const MAX_STATUS_MESSAGE = 300;

/**
 * Marks the span failed: ERROR status with the message, `error.type`, and an `exception` event without the
 * stack (stacks are large and say little about an engine's reply).
 */
export function recordFailure(t: Traced, err: unknown, opts: { errorType?: string; attributes?: Attributes } = {}): void {
  const span = t.span;
  if (!span.isRecording()) return;
  const message = (err instanceof Error ? err.message : typeof err === 'string' ? err : 'failed').slice(0, MAX_STATUS_MESSAGE);
  const type = opts.errorType ?? errorTypeOf(err);
  span.setStatus({ code: SpanStatusCode.ERROR, message });
  span.setAttribute(ATTR.errorType, type);
  if (opts.attributes) span.setAttributes(opts.attributes);
  span.addEvent('exception', { 'exception.type': type, 'exception.message': message });
}

/** Ends the span, first marking it failed when `err` is given. */
export function endTraced(t: Traced, err?: unknown): void {
  if (err !== undefined) recordFailure(t, err);
  t.span.end();
}

/** Runs `fn` inside a span that ends when it settles and records the error when it throws. */
export async function inSpan<T>(
  name: string,
  options: StartOptions,
  fn: (t: Traced) => Promise<T> | T,
  attributes?: () => Attributes,
): Promise<T> {
  const t = startTraced(name, options, attributes);
  try {
    return await fn(t);
  } catch (err) {
    recordFailure(t, err);
    throw err;
  } finally {
    t.span.end();
  }
}

/** The trace id of a span, span holder or context (default: the active context); undefined when there is none. */
export function traceIdOf(source?: Traced | Span | Context): string | undefined {
  if (!tracing.tracer) return undefined;
  let span: Span | undefined;
  if (source === undefined) span = trace.getActiveSpan();
  else if ('spanContext' in source && typeof source.spanContext === 'function') span = source;
  else if ('startedAt' in source) span = source.span;
  else span = trace.getSpan(source as Context);
  const sc = span?.spanContext();
  return sc && isValidSpanContext(sc) ? sc.traceId : undefined;
}
