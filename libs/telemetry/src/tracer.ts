import { randomFillSync } from 'node:crypto';
import {
  context as otelContext,
  isSpanContextValid,
  SpanKind,
  SpanStatusCode,
  trace,
  TraceFlags,
  type Attributes,
  type AttributeValue,
  type Context,
  type Exception,
  type HrTime,
  type Link,
  type Span,
  type SpanContext,
  type SpanOptions,
  type SpanStatus,
  type TimeInput,
  type Tracer,
} from '@opentelemetry/api';
import type { SamplerName, SpanLimitsConfig } from './config';
import type { SpanStarter } from './state';

// Triad's own span recorder. The OpenTelemetry trace SDK's spans are general-purpose: every span validates and
// copies its attributes one by one, reads the wall clock and the monotonic clock twice, keeps HrTime tuples,
// counts itself in self-observability metrics, and the context of every span is a copied Map. On the gateway's
// hot path (six spans per EPD request) and the scheduler's (seven), that was most of the tracing cost. This
// recorder keeps the API (`Tracer`, `Span`), the W3C context, the SDK's batch processor and OTLP exporter, and
// the six standard samplers, but records a span as one plain object: ids from two random numbers, times as epoch
// milliseconds on one process-wide clock, attributes adopted as built. Its spans are `ReadableSpan`s (the fields
// and HrTime getters the SDK's processors and exporters read), so any SDK `SpanExporter` takes them.

/** Span limits (`OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT`, `OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT`, ...), as the SDK applies them. */
export type SpanLimits = SpanLimitsConfig;

export const DEFAULT_SPAN_LIMITS: SpanLimits = {
  attributeCountLimit: 128,
  attributeValueLengthLimit: Infinity,
  eventCountLimit: 128,
  linkCountLimit: 128,
};

/** What receives ended spans: the SDK's `BatchSpanProcessor` (any `SpanProcessor`). */
export interface EndedSpanSink {
  onEnd(span: RecordedSpan): void;
}

/** The resource and instrumentation scope as the SDK's exporters read them (opaque here). */
export interface SpanOrigin {
  readonly resource: unknown;
  readonly instrumentationScope: { readonly name: string; readonly version?: string; readonly schemaUrl?: string };
}

// ---- clock -----------------------------------------------------------------------------------------------------

/**
 * Epoch milliseconds with sub-millisecond resolution: `performance.now()` plus one offset for the whole process,
 * so the order and durations of spans (and of times reported after the fact) are exact to the microsecond. The
 * offset starts at `performance.timeOrigin` and follows the wall clock when it drifts by more than 2 ms (checked
 * at most once a second), as NTP adjusts it.
 */
let clockOffset = performance.timeOrigin;
let nextClockCheck = 0;
const CLOCK_CHECK_MS = 1000;
const CLOCK_MAX_DRIFT_MS = 2;

function checkClock(perf: number): void {
  nextClockCheck = perf + CLOCK_CHECK_MS;
  const wall = Date.now() - perf;
  if (Math.abs(wall - clockOffset) > CLOCK_MAX_DRIFT_MS) clockOffset = wall;
}

/** Now, in epoch milliseconds (fractional). */
export function epochNow(): number {
  const perf = performance.now();
  if (perf >= nextClockCheck) checkClock(perf);
  return clockOffset + perf;
}

/**
 * `TimeInput` as epoch ms. A number below `performance.timeOrigin` is a `performance.now()` reading (as in the
 * SDK), including one slightly in the future (an end time computed ahead); a larger one is already epoch ms.
 */
export function epochOf(time: TimeInput): number {
  if (typeof time === 'number') return time < performance.timeOrigin ? clockOffset + time : time;
  if (time instanceof Date) return time.getTime();
  return time[0] * 1e3 + time[1] / 1e6;
}

/** Epoch ms as the API's HrTime `[seconds, nanoseconds]`. */
export function hrTimeOf(ms: number): HrTime {
  const seconds = Math.floor(ms / 1000);
  let nanos = Math.round((ms - seconds * 1000) * 1e6);
  if (nanos >= 1e9) return [seconds + 1, nanos - 1e9];
  if (nanos < 0) nanos = 0;
  return [seconds, nanos];
}

function isTimeInput(value: unknown): value is TimeInput {
  return typeof value === 'number' || value instanceof Date || (Array.isArray(value) && value.length === 2 && typeof value[0] === 'number');
}

// ---- ids and sampling -------------------------------------------------------------------------------------------

const ID_POOL_SIZE = 4096;
/** The random bytes ids are drawn from: a new buffer per refill, never rewritten, so a drawn id's bytes stay. */
let idPool = Buffer.allocUnsafe(0);
/**
 * A view of `idPool`, made once per refill: the OTLP encoder copies an id's bytes four at a time through it (a
 * byte loop cost about 55 instructions a byte, and a view per span would be made over and over).
 */
let idView = new DataView(idPool.buffer, 0, 0);
/** The pool as hex text, made once per refill; ids are cut from it. */
let hexPool = '';
let hexOffset = 0;

/**
 * `bytes` random bytes as hex, cut from a pool the CSPRNG refills every 4 KiB and converted to hex text in one
 * native call per refill: an id is a substring, not a `Buffer#toString('hex')` call of its own. The SDK's way
 * (`Math.random()` eight hex digits at a time, `toString(16)` of a double) took about 1 µs per span id. The id's
 * bytes are `idPool` from `drawnAt()` (read before the next draw).
 */
function randomHex(bytes: number): string {
  const chars = bytes * 2;
  if (hexOffset + chars > hexPool.length) {
    idPool = Buffer.allocUnsafe(ID_POOL_SIZE);
    randomFillSync(idPool);
    idView = new DataView(idPool.buffer, idPool.byteOffset, idPool.byteLength);
    hexPool = idPool.toString('hex');
    hexOffset = 0;
  }
  const hex = hexPool.slice(hexOffset, hexOffset + chars);
  hexOffset += chars;
  return hex;
}

/** Where the last id's bytes start in `idPool` (and `idView`). */
function drawnAt(bytes: number): number {
  return (hexOffset >>> 1) - bytes;
}

// What an all-zero (invalid) id is replaced with. Its hex is not its drawn bytes, so it is given no pool.
const SPAN_ID_FOR_ZERO = '0000000000000001';
const TRACE_ID_FOR_ZERO = '00000000000000000000000000000001';

/**
 * Whether the id of `bytes` bytes just drawn is all zero, read from its bytes: comparing the hex with a constant
 * is a `StringEqual` call of a few hundred instructions, two per span.
 */
function drawnZero(bytes: number): boolean {
  const at = drawnAt(bytes);
  for (let i = 0; i < bytes; i += 4) if (idView.getUint32(at + i) !== 0) return false;
  return true;
}

/**
 * A span context this tracer made, with the random bytes its hex ids were cut from: where they are in which pool
 * buffer, as the pool's DataView (`undefined` where the id did not come from a pool: a remote parent's trace id,
 * the all-zero id's replacement). The OTLP encoder copies those bytes instead of decoding the hex of every id of every span, the
 * largest part of its work per span after the attributes. The bytes are never written again once drawn; a context
 * keeps its 4 KiB pool alive while it lives (spans live until their batch is exported: a few pools at a time).
 */
export class DrawnSpanContext implements SpanContext {
  traceState: SpanContext['traceState'] = undefined;

  constructor(
    readonly traceId: string,
    readonly spanId: string,
    readonly traceFlags: number,
    readonly traceIdPool: DataView | undefined,
    readonly traceIdAt: number,
    readonly spanIdPool: DataView | undefined,
    readonly spanIdAt: number,
  ) {}
}

/** Whether a new span is sampled, given its valid parent (local or remote), if any, and its trace id. */
export type SampleFn = (parent: SpanContext | undefined, traceId: string) => boolean;

/**
 * The SDK's `TraceIdRatioBasedSampler` decision: the four 32-bit words of the trace id XORed, below
 * `ratio * 0xffffffff`. The same function in every Triad service, so a trace id gets the same answer everywhere.
 */
function ratioSampler(ratio: number): SampleFn {
  const r = Number.isNaN(ratio) ? 0 : Math.min(1, Math.max(0, ratio));
  const upper = r === 1 ? 0x100000000 : Math.floor(r * 0xffffffff);
  return (_parent, traceId) => {
    let acc = 0;
    for (let i = 0; i < 32; i += 8) acc = (acc ^ parseInt(traceId.slice(i, i + 8), 16)) >>> 0;
    return acc < upper;
  };
}

/**
 * The six `OTEL_TRACES_SAMPLER` samplers. `parentbased_*` follow a valid parent's sampled flag (local or remote,
 * the SDK's default delegates) and use the named sampler for roots; the others ignore the parent.
 */
export function samplerFor(name: SamplerName, ratio: number): SampleFn {
  const on: SampleFn = () => true;
  const off: SampleFn = () => false;
  const root = name.endsWith('always_on') ? on : name.endsWith('always_off') ? off : ratioSampler(ratio);
  if (!name.startsWith('parentbased_')) return root;
  return (parent, traceId) => (parent === undefined ? root(parent, traceId) : (parent.traceFlags & TraceFlags.SAMPLED) !== 0);
}

/**
 * `isSpanContextValid` of the API, without its two regular-expression tests for a context this tracer drew both
 * ids of: a trace id cut from random bytes (never all zero), or inherited from such a context, and a span id always
 * cut here. Any other context (a remote parent's, another tracer's) is checked by the API.
 */
export function isValidSpanContext(sc: SpanContext): boolean {
  if (sc instanceof DrawnSpanContext && sc.traceIdPool !== undefined) return true;
  return isSpanContextValid(sc);
}

// ---- spans --------------------------------------------------------------------------------------------------------

const UNSET: SpanStatus = Object.freeze({ code: SpanStatusCode.UNSET });
const NO_LINKS: Link[] = [];
const NO_EVENTS: RecordedEvent[] = [];

/** An event of a recorded span (`TimedEvent` for the SDK's exporters: `time` is derived from `ms`). */
class RecordedEvent {
  readonly droppedAttributesCount = 0;
  constructor(
    readonly name: string,
    readonly attributes: Attributes | undefined,
    readonly ms: number,
  ) {}
  get time(): HrTime {
    return hrTimeOf(this.ms);
  }
}

function truncate(value: AttributeValue, limit: number): AttributeValue {
  if (typeof value === 'string') return value.length > limit ? value.slice(0, limit) : value;
  if (Array.isArray(value)) {
    return (value as unknown[]).map((v) => (typeof v === 'string' && v.length > limit ? v.slice(0, limit) : v)) as AttributeValue;
  }
  return value;
}

function isAttributeValue(value: unknown): value is AttributeValue {
  const t = typeof value;
  return t === 'string' || t === 'number' || t === 'boolean' || Array.isArray(value);
}

/**
 * A sampled span: the API's `Span` for the code that records it, the SDK's `ReadableSpan` for the processor and the
 * exporter once it ended. Times are epoch ms (`startMs`, `endMs`); `startTime`, `endTime` and `duration` are the
 * HrTime views the SDK's exporters read.
 */
export class RecordedSpan implements Span {
  attributes: Attributes;
  events: RecordedEvent[] = NO_EVENTS;
  links: Link[] = NO_LINKS;
  status: SpanStatus = UNSET;
  endMs = 0;
  ended = false;
  droppedAttributesCount = 0;
  droppedEventsCount = 0;
  droppedLinksCount = 0;
  #attributeCount: number;

  constructor(
    readonly tracer: TriadTracer,
    public name: string,
    readonly kind: SpanKind,
    readonly ids: SpanContext,
    readonly parentSpanContext: SpanContext | undefined,
    readonly startMs: number,
    attributes: Attributes | undefined,
    attributeCount: number,
  ) {
    this.attributes = attributes ?? {};
    this.#attributeCount = attributeCount;
  }

  spanContext(): SpanContext {
    return this.ids;
  }

  get resource(): unknown {
    return this.tracer.origin.resource;
  }

  get instrumentationScope(): SpanOrigin['instrumentationScope'] {
    return this.tracer.origin.instrumentationScope;
  }

  get startTime(): HrTime {
    return hrTimeOf(this.startMs);
  }

  get endTime(): HrTime {
    return hrTimeOf(this.endMs);
  }

  get duration(): HrTime {
    const ms = this.endMs - this.startMs;
    const seconds = Math.floor(ms / 1000);
    return [seconds, Math.round((ms - seconds * 1000) * 1e6)];
  }

  setAttribute(key: string, value: AttributeValue | undefined): this {
    if (value === undefined || value === null || this.ended || key.length === 0 || !isAttributeValue(value)) return this;
    const attrs = this.attributes;
    const limits = this.tracer.limits;
    if (attrs[key] === undefined) {
      if (this.#attributeCount >= limits.attributeCountLimit) {
        this.droppedAttributesCount++;
        return this;
      }
      this.#attributeCount++;
    }
    attrs[key] = limits.attributeValueLengthLimit === Infinity ? value : truncate(value, limits.attributeValueLengthLimit);
    return this;
  }

  setAttributes(attributes: Attributes): this {
    for (const key in attributes) this.setAttribute(key, attributes[key]);
    return this;
  }

  addEvent(name: string, attributesOrTime?: Attributes | TimeInput, time?: TimeInput): this {
    if (this.ended) return this;
    let attributes: Attributes | undefined;
    if (isTimeInput(attributesOrTime)) {
      if (time === undefined) time = attributesOrTime;
    } else {
      attributes = attributesOrTime;
    }
    this.recordEvent(name, attributes, time === undefined ? epochNow() : epochOf(time));
    return this;
  }

  /** `addEvent` with the time already in epoch ms (no input checks). */
  recordEvent(name: string, attributes: Attributes | undefined, ms: number): void {
    if (this.ended) return;
    const limit = this.tracer.limits.eventCountLimit;
    if (limit === 0) {
      this.droppedEventsCount++;
      return;
    }
    if (this.events === NO_EVENTS) this.events = [];
    else if (this.events.length >= limit) {
      this.events.shift();
      this.droppedEventsCount++;
    }
    this.events.push(new RecordedEvent(name, attributes, ms));
  }

  addLink(link: Link): this {
    if (this.ended) return this;
    if (this.links.length >= this.tracer.limits.linkCountLimit) {
      this.droppedLinksCount++;
      return this;
    }
    if (this.links === NO_LINKS) this.links = [];
    this.links.push(link);
    return this;
  }

  addLinks(links: Link[]): this {
    for (const link of links) this.addLink(link);
    return this;
  }

  setStatus(status: SpanStatus): this {
    if (this.ended) return this;
    this.status =
      status.code === SpanStatusCode.ERROR && typeof status.message === 'string'
        ? {
            code: status.code,
            message: status.message,
          }
        : { code: status.code };
    return this;
  }

  updateName(name: string): this {
    if (!this.ended) this.name = name;
    return this;
  }

  end(endTime?: TimeInput): void {
    if (this.ended) return;
    const ms = endTime === undefined ? epochNow() : epochOf(endTime);
    this.endMs = ms < this.startMs ? this.startMs : ms;
    this.ended = true;
    this.tracer.sink.onEnd(this);
  }

  isRecording(): boolean {
    return !this.ended;
  }

  recordException(exception: Exception, time?: TimeInput): void {
    const attrs: Attributes = {};
    if (typeof exception === 'string') attrs['exception.message'] = exception;
    else if (exception) {
      if (exception.code !== undefined) attrs['exception.type'] = String(exception.code);
      else if (exception.name) attrs['exception.type'] = exception.name;
      if (exception.message) attrs['exception.message'] = exception.message;
      if (exception.stack) attrs['exception.stacktrace'] = exception.stack;
    }
    this.recordEvent('exception', attrs, time === undefined ? epochNow() : epochOf(time));
  }
}

// ---- tracer -------------------------------------------------------------------------------------------------------

export interface TriadTracerOptions {
  readonly sample: SampleFn;
  readonly sink: EndedSpanSink;
  readonly origin: SpanOrigin;
  readonly limits?: SpanLimits;
}

/**
 * The API `Tracer` of Triad's services. `begin` is the helpers' entry (parent given as a span context, attributes
 * adopted as built); `startSpan` is the API's, for any other caller.
 */
export class TriadTracer implements Tracer, SpanStarter {
  readonly sample: SampleFn;
  readonly sink: EndedSpanSink;
  readonly origin: SpanOrigin;
  readonly limits: SpanLimits;

  constructor(options: TriadTracerOptions) {
    this.sample = options.sample;
    this.sink = options.sink;
    this.origin = options.origin;
    this.limits = options.limits ?? DEFAULT_SPAN_LIMITS;
  }

  /**
   * Starts a span under `parent` (a valid span context, or undefined for a new trace). A span the sampler drops is
   * the API's non-recording span that carries the new context (its ids still propagate, with the sampled flag
   * clear). `attributes` must hold no `undefined` values; it is kept as the span's attribute object.
   */
  begin(
    name: string,
    kind: SpanKind,
    parent: SpanContext | undefined,
    startMs: number | undefined,
    attributes?: () => Attributes,
    links?: Link[],
  ): Span {
    const span = this.#begin(name, kind, parent, startMs, attributes);
    if (links !== undefined && span instanceof RecordedSpan) span.addLinks(links);
    return span;
  }

  #begin(name: string, kind: SpanKind, parent: SpanContext | undefined, startMs: number | undefined, attributes?: () => Attributes): Span {
    let traceId: string;
    let traceIdPool: DataView | undefined;
    let traceIdAt = 0;
    if (parent === undefined) {
      traceId = randomHex(16);
      traceIdAt = drawnAt(16);
      if (drawnZero(16)) traceId = TRACE_ID_FOR_ZERO;
      else traceIdPool = idView;
    } else {
      traceId = parent.traceId;
      if (parent instanceof DrawnSpanContext) {
        traceIdPool = parent.traceIdPool;
        traceIdAt = parent.traceIdAt;
      }
    }
    const sampled = this.sample(parent, traceId);
    let spanId = randomHex(8);
    const spanIdAt = drawnAt(8);
    let spanIdPool: DataView | undefined = idView;
    if (drawnZero(8)) {
      spanId = SPAN_ID_FOR_ZERO;
      spanIdPool = undefined;
    }
    const context = new DrawnSpanContext(
      traceId,
      spanId,
      sampled ? TraceFlags.SAMPLED : TraceFlags.NONE,
      traceIdPool,
      traceIdAt,
      spanIdPool,
      spanIdAt,
    );
    if (parent?.traceState !== undefined) context.traceState = parent.traceState;
    if (!sampled) return trace.wrapSpanContext(context);
    let attrs: Attributes | undefined;
    let count = 0;
    if (attributes !== undefined) {
      const built = attributes();
      for (const _ in built) count++;
      if (count <= this.limits.attributeCountLimit && this.limits.attributeValueLengthLimit === Infinity) {
        attrs = built;
      } else {
        const span = new RecordedSpan(this, name, kind, context, parent, startMs ?? epochNow(), undefined, 0);
        span.setAttributes(built);
        return span;
      }
    }
    return new RecordedSpan(this, name, kind, context, parent, startMs ?? epochNow(), attrs, count);
  }

  startSpan(name: string, options: SpanOptions = {}, context: Context = otelContext.active()): Span {
    let parent: SpanContext | undefined;
    if (!options.root) {
      const sc = trace.getSpanContext(context);
      if (sc !== undefined && isValidSpanContext(sc)) parent = sc;
    }
    const span = this.begin(
      name,
      options.kind ?? SpanKind.INTERNAL,
      parent,
      options.startTime === undefined ? undefined : epochOf(options.startTime),
    );
    if (span instanceof RecordedSpan) {
      if (options.attributes) span.setAttributes(options.attributes);
      if (options.links) span.addLinks(options.links);
    }
    return span;
  }

  startActiveSpan<F extends (span: Span) => unknown>(name: string, fn: F): ReturnType<F>;
  startActiveSpan<F extends (span: Span) => unknown>(name: string, options: SpanOptions, fn: F): ReturnType<F>;
  startActiveSpan<F extends (span: Span) => unknown>(name: string, options: SpanOptions, context: Context, fn: F): ReturnType<F>;
  startActiveSpan<F extends (span: Span) => unknown>(name: string, a?: SpanOptions | F, b?: Context | F, c?: F): ReturnType<F> {
    const fn = (c ?? (typeof b === 'function' ? b : a)) as F;
    const options = typeof a === 'object' ? a : {};
    const parent = typeof b === 'object' ? b : otelContext.active();
    const span = this.startSpan(name, options, parent);
    return otelContext.with(trace.setSpan(parent, span), fn as (span: Span) => ReturnType<F>, undefined, span);
  }
}
