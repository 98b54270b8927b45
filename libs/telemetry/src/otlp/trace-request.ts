import type { Attributes, HrTime, Link, SpanContext } from '@opentelemetry/api';
import type { ReadableSpan, TimedEvent } from '@opentelemetry/sdk-trace-base';
import { EncodedStrings } from './encoded-strings';
import { ProtoBuffer } from './proto-buffer';

// Wire types.
const VARINT = 0;
const I64 = 1;
const LEN = 2;
const I32 = 5;

// SpanFlags: the low byte is the W3C trace flags; bit 8 says bit 9 is meaningful, bit 9 says "remote parent".
const HAS_IS_REMOTE = 0x100;
const IS_REMOTE = 0x200;

// AnyValue.int_value is int64: integers outside [-2^63, 2^63) go out as double_value.
const INT64_MIN = -(2 ** 63);
const INT64_END = 2 ** 63;

type Resource = ReadableSpan['resource'];
type Scope = ReadableSpan['instrumentationScope'];

/**
 * Encodes an OTLP `ExportTraceServiceRequest` (opentelemetry/proto/collector/trace/v1) from ended spans, with the
 * exact bytes `ProtobufTraceSerializer` of @opentelemetry/otlp-transformer writes: spans grouped by resource, then
 * scope, each in order of first appearance; fields in field-number order; empty trace state, parent, status message,
 * kind UNSPECIFIED and schema URLs left out; dropped counts always written; flags always written. What it saves is
 * the repeated work: names and attribute keys (with the tags around a key) come out of an `EncodedStrings` cache,
 * ids are decoded straight into the buffer (a trace id once for the run of spans that share it), and the request
 * is written in one pass instead of a size pass and a write pass.
 */
export class TraceRequestEncoder {
  readonly #out = new ProtoBuffer();
  readonly #names: EncodedStrings;
  /** The last trace id written and its bytes (a request's spans share one): decoded once, not once per span. */
  #traceHex: string | undefined = undefined;
  readonly #traceBytes = new Uint8Array(17);

  constructor(names = new EncodedStrings()) {
    this.#names = names;
  }

  encode(spans: readonly ReadableSpan[]): Uint8Array {
    const out = this.#out;
    out.reset();
    for (const [resource, scopes] of groupByResourceAndScope(spans)) {
      out.tag(1, LEN);
      this.#resourceSpans(resource, scopes);
    }
    return out.take();
  }

  #resourceSpans(resource: Resource, scopes: Map<Scope, ReadableSpan[]>): void {
    const out = this.#out;
    const start = out.begin();
    out.tag(1, LEN);
    const resourceStart = out.begin();
    if (resource.attributes) this.#attributes(resource.attributes, 1);
    // Resource.dropped_attributes_count: the SDK's resources do not count drops.
    out.tag(2, VARINT);
    out.uint32(0);
    out.end(resourceStart);
    for (const [scope, spans] of scopes) {
      out.tag(2, LEN);
      this.#scopeSpans(scope, spans);
    }
    if (resource.schemaUrl) {
      out.tag(3, LEN);
      this.#names.write(out, resource.schemaUrl);
    }
    out.end(start);
  }

  #scopeSpans(scope: Scope, spans: readonly ReadableSpan[]): void {
    const out = this.#out;
    const start = out.begin();
    out.tag(1, LEN);
    const scopeStart = out.begin();
    out.tag(1, LEN);
    this.#names.write(out, scope.name);
    if (scope.version) {
      out.tag(2, LEN);
      this.#names.write(out, scope.version);
    }
    // The SDK's InstrumentationScope type has neither, but a scope object may carry them.
    const extra = scope as { attributes?: Attributes; droppedAttributesCount?: number };
    if (extra.attributes) this.#attributes(extra.attributes, 3);
    if (extra.droppedAttributesCount) {
      out.tag(4, VARINT);
      out.varint(extra.droppedAttributesCount);
    }
    out.end(scopeStart);
    for (const span of spans) {
      out.tag(2, LEN);
      this.#span(span);
    }
    if (scope.schemaUrl) {
      out.tag(3, LEN);
      this.#names.write(out, scope.schemaUrl);
    }
    out.end(start);
  }

  #span(span: ReadableSpan): void {
    const out = this.#out;
    const names = this.#names;
    const start = out.begin();
    const ids = span.spanContext();
    this.#ids(ids);
    const parent = span.parentSpanContext;
    if (parent?.spanId) {
      out.tag(4, LEN);
      out.hexId(parent.spanId);
    }
    out.tag(5, LEN);
    names.write(out, span.name);
    // SpanKind in the API starts at INTERNAL = 0; on the wire 0 is UNSPECIFIED, so everything moves up by one.
    const kind = span.kind == null ? 0 : span.kind + 1;
    if (kind !== 0) {
      out.tag(6, VARINT);
      out.varint(kind);
    }
    out.tag(7, I64);
    writeNanos(out, span.startTime);
    out.tag(8, I64);
    writeNanos(out, span.endTime);
    if (span.attributes) this.#attributes(span.attributes, 9);
    out.tag(10, VARINT);
    out.varint(span.droppedAttributesCount);
    for (const event of span.events) {
      out.tag(11, LEN);
      this.#event(event);
    }
    out.tag(12, VARINT);
    out.varint(span.droppedEventsCount);
    for (const link of span.links) {
      out.tag(13, LEN);
      this.#link(link);
    }
    out.tag(14, VARINT);
    out.varint(span.droppedLinksCount);
    out.tag(15, LEN);
    const statusStart = out.begin();
    if (span.status.message) {
      out.tag(2, LEN);
      names.write(out, span.status.message);
    }
    out.tag(3, VARINT);
    out.varint(span.status.code);
    out.end(statusStart);
    out.tag(16, I32);
    out.fixed32(spanFlags(ids, parent?.isRemote));
    out.end(start);
  }

  #event(event: TimedEvent): void {
    const out = this.#out;
    const start = out.begin();
    out.tag(1, I64);
    writeNanos(out, event.time);
    out.tag(2, LEN);
    this.#names.write(out, event.name);
    if (event.attributes) this.#attributes(event.attributes, 3);
    out.tag(4, VARINT);
    out.varint(event.droppedAttributesCount || 0);
    out.end(start);
  }

  /** Fields 1–3, the same in a Span and a Link: trace id, span id, trace state. */
  #ids(ids: SpanContext): void {
    const out = this.#out;
    out.tag(1, LEN);
    const traceId = ids.traceId;
    if (traceId === this.#traceHex) {
      out.raw(this.#traceBytes);
    } else {
      const start = out.pos;
      out.hexId(traceId);
      // A W3C trace id is 16 bytes, one length byte ahead of them; any other length is written but not kept.
      if (out.pos - start === this.#traceBytes.length) {
        out.copyTo(this.#traceBytes, start);
        this.#traceHex = traceId;
      }
    }
    out.tag(2, LEN);
    out.hexId(ids.spanId);
    const traceState = ids.traceState?.serialize();
    if (traceState) {
      out.tag(3, LEN);
      out.string(traceState);
    }
  }

  #link(link: Link): void {
    const out = this.#out;
    const start = out.begin();
    const ids = link.context;
    this.#ids(ids);
    if (link.attributes) this.#attributes(link.attributes, 4);
    out.tag(5, VARINT);
    out.varint(link.droppedAttributesCount || 0);
    out.tag(6, I32);
    out.fixed32(spanFlags(ids, ids.isRemote));
    out.end(start);
  }

  /** Each own enumerable attribute as a repeated KeyValue under `field`, in the object's key order. */
  #attributes(attributes: Attributes, field: number): void {
    const out = this.#out;
    for (const key in attributes) {
      if (!Object.prototype.hasOwnProperty.call(attributes, key)) continue;
      out.tag(field, LEN);
      const start = out.begin();
      this.#keyValue(key, attributes[key]);
      out.end(start);
    }
  }

  #keyValue(key: string, value: unknown): void {
    const out = this.#out;
    // The key field, its string and the value field's tag, as one cached chunk.
    this.#names.writeKey(out, key);
    const start = out.begin();
    this.#anyValue(value);
    out.end(start);
  }

  /** An AnyValue; a value of no OTLP type (undefined, null, a function) leaves it empty. */
  #anyValue(value: unknown): void {
    const out = this.#out;
    switch (typeof value) {
      case 'string':
        out.tag(1, LEN);
        out.string(value);
        return;
      case 'boolean':
        out.tag(2, VARINT);
        out.uint32(value ? 1 : 0);
        return;
      case 'number':
        if (Number.isInteger(value) && value >= INT64_MIN && value < INT64_END) {
          out.tag(3, VARINT);
          out.varint(value);
        } else {
          out.tag(4, I64);
          out.double(value);
        }
        return;
    }
    if (value instanceof Uint8Array) {
      out.tag(7, LEN);
      out.lengthPrefixed(value);
    } else if (Array.isArray(value)) {
      out.tag(5, LEN);
      const arrayStart = out.begin();
      for (const item of value) {
        out.tag(1, LEN);
        const itemStart = out.begin();
        this.#anyValue(item);
        out.end(itemStart);
      }
      out.end(arrayStart);
    } else if (typeof value === 'object' && value !== null) {
      out.tag(6, LEN);
      const listStart = out.begin();
      const entries = value as Record<string, unknown>;
      for (const key in entries) {
        if (!Object.prototype.hasOwnProperty.call(entries, key)) continue;
        out.tag(1, LEN);
        const start = out.begin();
        this.#keyValue(key, entries[key]);
        out.end(start);
      }
      out.end(listStart);
    }
  }
}

function spanFlags(ids: SpanContext, remote: boolean | undefined): number {
  return (ids.traceFlags & 0xff) | HAS_IS_REMOTE | (remote ? IS_REMOTE : 0);
}

/**
 * An HrTime as fixed64 nanoseconds since the epoch. seconds × 1e9 exceeds 2^53 for today's timestamps, so seconds
 * is split at bit 16 and each part's product (below 2^53) is carried into the low and high 32-bit words.
 */
function writeNanos(out: ProtoBuffer, time: HrTime): void {
  const seconds = time[0];
  const lowPart = (seconds & 0xffff) * 1e9;
  const highPart = ((seconds / 0x10000) >>> 0) * 1e9;
  // highPart counts units of 2^16 ns: its low 16 bits land in the low word's top half, the rest in the high word.
  const low = (lowPart >>> 0) + (((highPart & 0xffff) * 0x10000) >>> 0) + time[1];
  const high = Math.floor(lowPart / 0x100000000) + ((highPart / 0x10000) >>> 0) + Math.floor(low / 0x100000000);
  out.fixed64(low >>> 0, high >>> 0);
}

/** Spans by resource, then by scope, by identity, each group in order of its first span. */
function groupByResourceAndScope(spans: readonly ReadableSpan[]): Map<Resource, Map<Scope, ReadableSpan[]>> {
  const resources = new Map<Resource, Map<Scope, ReadableSpan[]>>();
  for (const span of spans) {
    let scopes = resources.get(span.resource);
    if (scopes === undefined) {
      scopes = new Map();
      resources.set(span.resource, scopes);
    }
    const group = scopes.get(span.instrumentationScope);
    if (group === undefined) scopes.set(span.instrumentationScope, [span]);
    else group.push(span);
  }
  return resources;
}
