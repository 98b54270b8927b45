import type { Attributes, HrTime, Link, SpanContext } from '@opentelemetry/api';
import type { ReadableSpan, TimedEvent } from '@opentelemetry/sdk-trace-base';
import { DrawnSpanContext, RecordedSpan } from '../tracer';
import { AttributeMemo, AttributeSlot, MAX_KEPT_BYTES, MAX_SLOTS, NOT_KEPT } from './attribute-memo';
import { EncodedStrings } from './encoded-strings';
import { ProtoBuffer, varintLength } from './proto-buffer';

// Wire types.
const VARINT = 0;
const I64 = 1;
const LEN = 2;
const I32 = 5;

// SpanFlags: the low byte is the W3C trace flags; bit 8 says bit 9 is meaningful, bit 9 says "remote parent".
const HAS_IS_REMOTE = 0x100;
const IS_REMOTE = 0x200;

// Tags of fields written on every span, as the one byte each is (field numbers below 16).
const TRACE_ID_TAG = (1 << 3) | LEN;
const SPAN_ID_TAG = (2 << 3) | LEN;
const PARENT_SPAN_ID_TAG = (4 << 3) | LEN;
const SPAN_NAME_TAG = (5 << 3) | LEN;
const KIND_TAG = (6 << 3) | VARINT;
const START_TIME_TAG = (7 << 3) | I64;
const END_TIME_TAG = (8 << 3) | I64;
// AnyValue's string_value, bool_value, int_value.
const STRING_VALUE_TAG = (1 << 3) | LEN;
const BOOL_VALUE_TAG = (2 << 3) | VARINT;
const INT_VALUE_TAG = (3 << 3) | VARINT;

// AnyValue.int_value is int64: integers outside [-2^63, 2^63) go out as double_value.
const INT64_MIN = -(2 ** 63);
const INT64_END = 2 ** 63;

type Resource = ReadableSpan['resource'];
type Scope = ReadableSpan['instrumentationScope'];

/** The last id of one kind written (hex) and its length-prefixed bytes, to copy when the next id is the same. */
interface LastId {
  hex: string | undefined;
  readonly bytes: Uint8Array;
}

// Imported bindings read once: under tsx (the benchmarks, the tests) every use of an imported binding is a call of an
// export getter, once per attribute here; the production bundle has no getters, and these cost it nothing.
const SLOT_LIMIT = MAX_SLOTS;
const KEPT_BYTES_LIMIT = MAX_KEPT_BYTES;
const Slot = AttributeSlot;
const NOT_KEPT_VALUE = NOT_KEPT;
const Recorded = RecordedSpan;
const Drawn = DrawnSpanContext;
const lengthOfVarint = varintLength;

/**
 * Encodes an OTLP `ExportTraceServiceRequest` (opentelemetry/proto/collector/trace/v1) from ended spans, with the
 * exact bytes `ProtobufTraceSerializer` of @opentelemetry/otlp-transformer writes: spans grouped by resource, then
 * scope, each in order of first appearance; fields in field-number order; empty trace state, parent, status message,
 * kind UNSPECIFIED and schema URLs left out; dropped counts always written; flags always written. What it saves is
 * the repeated work: names and attribute keys (with the tags around a key) come out of an `EncodedStrings` cache,
 * an attribute whose key and value repeat those at the same position of the last span of the same name is copied
 * as one encoded chunk (`AttributeMemo`), the recorder's ids are copied from the random bytes they were drawn as
 * (`DrawnSpanContext`) and other ids decoded straight into the buffer (a trace id once for the run of spans that
 * share it, a parent id once for the run of its children), and the request is written in one pass instead of a
 * size pass and a write pass.
 */
export class TraceRequestEncoder {
  readonly #out = new ProtoBuffer();
  readonly #names: EncodedStrings;
  /** The last trace id written and its bytes (a request's spans share one): decoded once, not once per span. */
  readonly #trace: LastId = { hex: undefined, bytes: new Uint8Array(17) };
  /** The last parent span id written (a request span is the parent of every other span of its request). */
  readonly #parent: LastId = { hex: undefined, bytes: new Uint8Array(9) };
  readonly #resourceAttributes = new AttributeMemo();
  readonly #scopeAttributes = new AttributeMemo();
  readonly #linkAttributes = new AttributeMemo();

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
    return out.detach();
  }

  #resourceSpans(resource: Resource, scopes: Map<Scope, ReadableSpan[]>): void {
    const out = this.#out;
    const start = out.begin();
    out.tag(1, LEN);
    const resourceStart = out.begin();
    if (resource.attributes) this.#attributes(resource.attributes, 1, this.#resourceAttributes);
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
    const start = out.beginWide();
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
    if (extra.attributes) this.#attributes(extra.attributes, 3, this.#scopeAttributes);
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
    out.endWide(start);
  }

  #span(span: ReadableSpan): void {
    const out = this.#out;
    const names = this.#names;
    const start = out.beginWide();
    const ids = span.spanContext();
    this.#ids(ids);
    const parent = span.parentSpanContext;
    if (parent?.spanId) {
      out.byte(PARENT_SPAN_ID_TAG);
      if (parent instanceof Drawn && parent.spanIdPool !== undefined) out.lengthPrefixedFrom(parent.spanIdPool, parent.spanIdAt, 8);
      else this.#id(parent.spanId, this.#parent);
    }
    const name = names.named(span.name);
    out.byte(SPAN_NAME_TAG);
    if (name !== undefined) out.raw(name.encoded);
    else names.write(out, span.name);
    // SpanKind in the API starts at INTERNAL = 0; on the wire 0 is UNSPECIFIED, so everything moves up by one.
    const kind = span.kind == null ? 0 : span.kind + 1;
    if (kind !== 0) {
      out.byte(KIND_TAG);
      out.varint(kind);
    }
    if (span instanceof Recorded) {
      // Triad's recorder keeps epoch ms: the HrTime getters would build a tuple per call.
      out.byte(START_TIME_TAG);
      writeEpochMs(out, span.startMs);
      out.byte(END_TIME_TAG);
      writeEpochMs(out, span.endMs);
    } else {
      out.byte(START_TIME_TAG);
      writeNanos(out, span.startTime);
      out.byte(END_TIME_TAG);
      writeNanos(out, span.endTime);
    }
    if (span.attributes) this.#attributes(span.attributes, 9, name?.attributes);
    const status = span.status;
    const code = status.code;
    if (
      span.droppedAttributesCount === 0 &&
      span.events.length === 0 &&
      span.droppedEventsCount === 0 &&
      span.links.length === 0 &&
      span.droppedLinksCount === 0 &&
      !status.message &&
      code >= 0 &&
      code < 0x80 &&
      (code | 0) === code
    ) {
      // Nearly every span: the same bytes as the general tail below, put with one ensure.
      const flags = spanFlags(ids, parent?.isRemote);
      out.ensure(16);
      const bytes = out.bytes;
      let p = out.pos;
      // dropped_attributes_count, dropped_events_count, dropped_links_count: 0.
      bytes[p++] = (10 << 3) | VARINT;
      bytes[p++] = 0;
      bytes[p++] = (12 << 3) | VARINT;
      bytes[p++] = 0;
      bytes[p++] = (14 << 3) | VARINT;
      bytes[p++] = 0;
      // status: a 2-byte Status of its code alone.
      bytes[p++] = (15 << 3) | LEN;
      bytes[p++] = 2;
      bytes[p++] = (3 << 3) | VARINT;
      bytes[p++] = code;
      // flags: field 16's tag is a two-byte varint, then the fixed32, little-endian.
      bytes[p++] = ((16 << 3) | I32 | 0x80) & 0xff;
      bytes[p++] = 1;
      bytes[p++] = flags;
      bytes[p++] = flags >>> 8;
      bytes[p++] = flags >>> 16;
      bytes[p++] = flags >>> 24;
      out.pos = p;
      out.endWide(start);
      return;
    }
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
    if (status.message) {
      out.tag(2, LEN);
      names.write(out, status.message);
    }
    out.tag(3, VARINT);
    out.varint(code);
    out.end(statusStart);
    out.tag(16, I32);
    out.fixed32(spanFlags(ids, parent?.isRemote));
    out.endWide(start);
  }

  #event(event: TimedEvent): void {
    const out = this.#out;
    const start = out.begin();
    out.tag(1, I64);
    writeNanos(out, event.time);
    out.tag(2, LEN);
    const name = this.#names.named(event.name);
    if (name !== undefined) out.raw(name.encoded);
    else this.#names.write(out, event.name);
    if (event.attributes) this.#attributes(event.attributes, 3, name?.attributes);
    out.tag(4, VARINT);
    out.varint(event.droppedAttributesCount || 0);
    out.end(start);
  }

  /** Fields 1–3, the same in a Span and a Link: trace id, span id, trace state. */
  #ids(ids: SpanContext): void {
    const out = this.#out;
    out.byte(TRACE_ID_TAG);
    // The recorder's ids: their bytes as drawn (see DrawnSpanContext), not decoded from hex.
    const drawn = ids instanceof Drawn ? ids : undefined;
    if (drawn?.traceIdPool !== undefined) out.lengthPrefixedFrom(drawn.traceIdPool, drawn.traceIdAt, 16);
    else this.#id(ids.traceId, this.#trace);
    out.byte(SPAN_ID_TAG);
    if (drawn?.spanIdPool !== undefined) out.lengthPrefixedFrom(drawn.spanIdPool, drawn.spanIdAt, 8);
    else out.hexId(ids.spanId);
    const traceState = ids.traceState?.serialize();
    if (traceState) {
      out.tag(3, LEN);
      out.string(traceState);
    }
  }

  /** A length-prefixed id from hex, copied from `last` when it is the id written there last. */
  #id(hex: string, last: LastId): void {
    const out = this.#out;
    if (hex === last.hex) {
      out.raw(last.bytes);
      return;
    }
    const start = out.pos;
    out.hexId(hex);
    // A W3C id of the expected size (one length byte ahead of its bytes) is kept; any other is written, not kept.
    if (out.pos - start === last.bytes.length) {
      out.copyTo(last.bytes, start);
      last.hex = hex;
    }
  }

  #link(link: Link): void {
    const out = this.#out;
    const start = out.begin();
    const ids = link.context;
    this.#ids(ids);
    if (link.attributes) this.#attributes(link.attributes, 4, this.#linkAttributes);
    out.tag(5, VARINT);
    out.varint(link.droppedAttributesCount || 0);
    out.tag(6, I32);
    out.fixed32(spanFlags(ids, ids.isRemote));
    out.end(start);
  }

  /**
   * Each own enumerable attribute as a repeated KeyValue under `field` (below 16: a one-byte tag), in the object's
   * key order. With a memo, attributes whose keys and values are those at the same positions last time are copied
   * from its block, a run of them in a row as one chunk; the others are encoded, and kept for next time while the
   * values at their positions repeat.
   */
  #attributes(attributes: Attributes, field: number, memo: AttributeMemo | undefined): void {
    const out = this.#out;
    const tag = (field << 3) | LEN;
    if (memo === undefined) {
      for (const key in attributes) {
        // Spelled out: TurboFan recognizes this call on a for-in key (no call at all, and the value read below stays a
        // load by enum-cache index); through an alias it is an opaque call, and the read a megamorphic keyed load.
        if (!Object.prototype.hasOwnProperty.call(attributes, key)) continue;
        out.byte(tag);
        this.#keyValue(this.#names.keyHead(key), attributes[key]);
      }
      return;
    }
    if (memo.tag !== tag) memo.restart(tag);
    const slots = memo.slots;
    // The run of kept attributes not yet copied: the block from `run.at` to `runEnd` (none while `run` is undefined).
    let run: AttributeSlot | undefined;
    let runEnd = 0;
    // A kept attribute was added, replaced or dropped: the block is rebuilt at the end.
    let changed = false;
    let position = 0;
    for (const key in attributes) {
      if (!Object.prototype.hasOwnProperty.call(attributes, key)) continue;
      const value = attributes[key];
      let slot: AttributeSlot | undefined;
      if (position < slots.length) {
        slot = slots[position];
        if (slot.key === key) {
          // Equal primitives encode alike (0 and -0 both as int 0); NaN never equals, nor does NOT_KEPT.
          if (slot.value === value) {
            position++;
            // Kept positions in a row are next to each other in the block: a run grows by each one that repeats.
            if (run === undefined) run = slot;
            runEnd = slot.end;
            continue;
          }
          if (slot.value !== NOT_KEPT_VALUE) changed = true;
        } else {
          if (slot.value !== NOT_KEPT_VALUE) changed = true;
          slot.key = key;
          slot.head = this.#names.keyHead(key);
        }
        slot.changes++;
      } else if (position < SLOT_LIMIT) {
        slot = new Slot(key, this.#names.keyHead(key));
        slots.push(slot);
      }
      if (run !== undefined) {
        this.#copyRun(memo, run, runEnd);
        run = undefined;
      }
      const start = out.pos;
      out.byte(tag);
      if (slot === undefined) {
        this.#keyValue(this.#names.keyHead(key), value);
        continue;
      }
      position++;
      this.#keyValue(slot.head, value);
      const type = typeof value;
      if (slot.keeps && (type === 'string' || type === 'number' || type === 'boolean') && out.pos - start <= KEPT_BYTES_LIMIT) {
        slot.value = value;
        slot.at = start;
        slot.end = out.pos;
        slot.fresh = true;
        changed = true;
      } else {
        slot.value = NOT_KEPT_VALUE;
      }
    }
    if (run !== undefined) this.#copyRun(memo, run, runEnd);
    if (changed) memo.rebuild(out.bytes);
  }

  /** The memo's block from `first.at` to `end`, through the view `first` keeps of it (made when the run is new). */
  #copyRun(memo: AttributeMemo, first: AttributeSlot, end: number): void {
    let chunk = first.run;
    if (chunk === undefined || chunk.length !== end - first.at) chunk = first.run = memo.block.subarray(first.at, end);
    this.#out.raw(chunk);
  }

  /**
   * A KeyValue message (length prefix included) of a key's cached head and a value. A string, an integer in
   * [0, 2^31) or a boolean whose KeyValue is shorter than 128 bytes has its lengths written up front, from the
   * string's length (its bytes when ASCII, checked as it is copied; otherwise it is written again the general way).
   */
  #keyValue(head: Uint8Array, value: unknown): void {
    const out = this.#out;
    const headLength = head.length;
    if (typeof value === 'string') {
      const n = value.length;
      // head, AnyValue length, string_value tag, string length, bytes: every length one byte.
      const length = headLength + 3 + n;
      if (length < 0x80) {
        const start = out.pos;
        out.ensure(length + 1);
        out.bytes[start] = length;
        out.pos = start + 1;
        out.raw(head);
        const bytes = out.bytes;
        let p = out.pos;
        bytes[p++] = n + 2;
        bytes[p++] = STRING_VALUE_TAG;
        bytes[p++] = n;
        out.pos = p;
        if (out.ascii(value)) return;
        out.pos = start;
      }
    } else if (typeof value === 'number') {
      if ((value | 0) === value && value >= 0) {
        const valueLength = 1 + lengthOfVarint(value);
        const length = headLength + 1 + valueLength;
        if (length < 0x80) {
          out.ensure(length + 1);
          out.bytes[out.pos++] = length;
          out.raw(head);
          const bytes = out.bytes;
          let p = out.pos;
          bytes[p++] = valueLength;
          bytes[p++] = INT_VALUE_TAG;
          let v = value;
          while (v > 0x7f) {
            bytes[p++] = (v & 0x7f) | 0x80;
            v >>>= 7;
          }
          bytes[p++] = v;
          out.pos = p;
          return;
        }
      }
    } else if (typeof value === 'boolean' && headLength + 3 < 0x80) {
      out.ensure(headLength + 4);
      out.bytes[out.pos++] = headLength + 3;
      out.raw(head);
      const bytes = out.bytes;
      let p = out.pos;
      bytes[p++] = 2;
      bytes[p++] = BOOL_VALUE_TAG;
      bytes[p++] = value ? 1 : 0;
      out.pos = p;
      return;
    }
    const start = out.begin();
    out.raw(head);
    const valueStart = out.begin();
    this.#anyValue(value);
    out.end(valueStart);
    out.end(start);
  }

  /** A KeyValue inside a kvlist_value: the key's cached head, no memo. */
  #nestedKeyValue(key: string, value: unknown): void {
    this.#keyValue(this.#names.keyHead(key), value);
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
        this.#nestedKeyValue(key, entries[key]);
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
  writeSecondsNanos(out, time[0], time[1]);
}

/**
 * Epoch ms as `writeNanos(out, hrTimeOf(ms))` writes them (tracer.ts: the same seconds, the same rounding of the
 * nanoseconds and the same carry), without the tuple.
 */
function writeEpochMs(out: ProtoBuffer, ms: number): void {
  let seconds = Math.floor(ms / 1000);
  let nanos = Math.round((ms - seconds * 1000) * 1e6);
  if (nanos >= 1e9) {
    seconds += 1;
    nanos -= 1e9;
  } else if (nanos < 0) {
    nanos = 0;
  }
  writeSecondsNanos(out, seconds, nanos);
}

function writeSecondsNanos(out: ProtoBuffer, seconds: number, nanos: number): void {
  const lowPart = (seconds & 0xffff) * 1e9;
  const highPart = ((seconds / 0x10000) >>> 0) * 1e9;
  // highPart counts units of 2^16 ns: its low 16 bits land in the low word's top half, the rest in the high word.
  const low = (lowPart >>> 0) + (((highPart & 0xffff) * 0x10000) >>> 0) + nanos;
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
