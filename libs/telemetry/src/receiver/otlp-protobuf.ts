import { ProtoReader, toHex, WireType } from './protobuf-reader';
import {
  completeSpan,
  int64Value,
  kindName,
  presentId,
  statusName,
  type AttrMap,
  type AttrValue,
  type ReceivedEvent,
  type ReceivedLink,
  type ReceivedSpan,
} from './span-model';

// Field numbers of the OTLP trace protocol (opentelemetry-proto, collector/trace/v1 and trace/v1, common/v1,
// resource/v1). Only the fields a test or the viewer reads are decoded; everything else is skipped.
//   ExportTraceServiceRequest { 1: repeated ResourceSpans }
//   ResourceSpans { 1: Resource, 2: repeated ScopeSpans }        Resource { 1: repeated KeyValue }
//   ScopeSpans { 1: InstrumentationScope, 2: repeated Span }     InstrumentationScope { 1: name, 2: version }
//   Span { 1: trace_id, 2: span_id, 3: trace_state, 4: parent_span_id, 5: name, 6: kind, 7: start fixed64,
//          8: end fixed64, 9: repeated KeyValue, 11: repeated Event, 13: repeated Link, 15: Status }
//   Event { 1: time fixed64, 2: name, 3: repeated KeyValue }     Link { 1: trace_id, 2: span_id, 4: repeated KeyValue }
//   Status { 2: message, 3: code }                               KeyValue { 1: key, 2: AnyValue }
//   AnyValue { oneof 1: string, 2: bool, 3: int64, 4: double, 5: ArrayValue, 6: KeyValueList, 7: bytes }
//   ArrayValue { 1: repeated AnyValue }                          KeyValueList { 1: repeated KeyValue }

function anyValue(r: ProtoReader): AttrValue {
  let value: AttrValue = null;
  while (!r.done) {
    const { field, wire } = r.key();
    if (field === 1 && wire === WireType.LengthDelimited) value = r.string();
    else if (field === 2 && wire === WireType.Varint) value = r.bool();
    else if (field === 3 && wire === WireType.Varint) value = int64Value(r.int64());
    else if (field === 4 && wire === WireType.Fixed64) value = r.double();
    else if (field === 5 && wire === WireType.LengthDelimited) value = arrayValue(r.message());
    else if (field === 6 && wire === WireType.LengthDelimited) value = keyValues(r.message(), 1);
    else if (field === 7 && wire === WireType.LengthDelimited) value = Buffer.from(r.bytes()).toString('base64');
    else r.skip(wire);
  }
  return value;
}

function arrayValue(r: ProtoReader): AttrValue[] {
  const out: AttrValue[] = [];
  while (!r.done) {
    const { field, wire } = r.key();
    if (field === 1 && wire === WireType.LengthDelimited) out.push(anyValue(r.message()));
    else r.skip(wire);
  }
  return out;
}

function keyValue(r: ProtoReader, into: AttrMap): void {
  let key = '';
  let value: AttrValue = null;
  while (!r.done) {
    const { field, wire } = r.key();
    if (field === 1 && wire === WireType.LengthDelimited) key = r.string();
    else if (field === 2 && wire === WireType.LengthDelimited) value = anyValue(r.message());
    else r.skip(wire);
  }
  into[key] = value;
}

/** Reads the repeated KeyValue field `kvField` of the message in `r` into a map. */
function keyValues(r: ProtoReader, kvField: number): AttrMap {
  const out: AttrMap = {};
  while (!r.done) {
    const { field, wire } = r.key();
    if (field === kvField && wire === WireType.LengthDelimited) keyValue(r.message(), out);
    else r.skip(wire);
  }
  return out;
}

function event(r: ProtoReader): ReceivedEvent {
  let timeUnixNano = '0';
  let name = '';
  const attributes: AttrMap = {};
  while (!r.done) {
    const { field, wire } = r.key();
    if (field === 1 && wire === WireType.Fixed64) timeUnixNano = r.fixed64().toString();
    else if (field === 2 && wire === WireType.LengthDelimited) name = r.string();
    else if (field === 3 && wire === WireType.LengthDelimited) keyValue(r.message(), attributes);
    else r.skip(wire);
  }
  return { name, timeUnixNano, attributes };
}

function link(r: ProtoReader): ReceivedLink {
  let traceId = '';
  let spanId = '';
  const attributes: AttrMap = {};
  while (!r.done) {
    const { field, wire } = r.key();
    if (field === 1 && wire === WireType.LengthDelimited) traceId = toHex(r.bytes());
    else if (field === 2 && wire === WireType.LengthDelimited) spanId = toHex(r.bytes());
    else if (field === 4 && wire === WireType.LengthDelimited) keyValue(r.message(), attributes);
    else r.skip(wire);
  }
  return { traceId, spanId, attributes };
}

function status(r: ProtoReader): ReceivedSpan['status'] {
  let message = '';
  let code = 0;
  while (!r.done) {
    const { field, wire } = r.key();
    if (field === 2 && wire === WireType.LengthDelimited) message = r.string();
    else if (field === 3 && wire === WireType.Varint) code = r.uint32();
    else r.skip(wire);
  }
  return message ? { code: statusName(code), message } : { code: statusName(code) };
}

function span(r: ProtoReader, resource: AttrMap, scope: ReceivedSpan['scope']): ReceivedSpan {
  let traceId = '';
  let spanId = '';
  let parent = '';
  let traceState = '';
  let name = '';
  let kind = 0;
  let start = 0n;
  let end = 0n;
  const attributes: AttrMap = {};
  const events: ReceivedEvent[] = [];
  const links: ReceivedLink[] = [];
  let st: ReceivedSpan['status'] = { code: 'UNSET' };
  while (!r.done) {
    const { field, wire } = r.key();
    if (wire === WireType.LengthDelimited) {
      if (field === 1) traceId = toHex(r.bytes());
      else if (field === 2) spanId = toHex(r.bytes());
      else if (field === 3) traceState = r.string();
      else if (field === 4) parent = toHex(r.bytes());
      else if (field === 5) name = r.string();
      else if (field === 9) keyValue(r.message(), attributes);
      else if (field === 11) events.push(event(r.message()));
      else if (field === 13) links.push(link(r.message()));
      else if (field === 15) st = status(r.message());
      else r.skip(wire);
    } else if (field === 6 && wire === WireType.Varint) kind = r.uint32();
    else if (field === 7 && wire === WireType.Fixed64) start = r.fixed64();
    else if (field === 8 && wire === WireType.Fixed64) end = r.fixed64();
    else r.skip(wire);
  }
  const parentSpanId = presentId(parent);
  return completeSpan({
    traceId,
    spanId,
    ...(parentSpanId ? { parentSpanId } : {}),
    ...(traceState ? { traceState } : {}),
    name,
    kind: kindName(kind),
    startTimeUnixNano: start.toString(),
    endTimeUnixNano: end.toString(),
    attributes,
    events,
    links,
    status: st,
    resource,
    scope,
  });
}

function scopeOf(r: ProtoReader): ReceivedSpan['scope'] {
  let name = '';
  let version = '';
  while (!r.done) {
    const { field, wire } = r.key();
    if (field === 1 && wire === WireType.LengthDelimited) name = r.string();
    else if (field === 2 && wire === WireType.LengthDelimited) version = r.string();
    else r.skip(wire);
  }
  return version ? { name, version } : { name };
}

function scopeSpans(r: ProtoReader, resource: AttrMap, out: ReceivedSpan[]): void {
  let scope: ReceivedSpan['scope'] = { name: '' };
  const raw: ProtoReader[] = [];
  while (!r.done) {
    const { field, wire } = r.key();
    if (field === 1 && wire === WireType.LengthDelimited) scope = scopeOf(r.message());
    else if (field === 2 && wire === WireType.LengthDelimited) raw.push(r.message());
    else r.skip(wire);
  }
  // Fields may come in any order: spans are decoded once the scope is known.
  for (const s of raw) out.push(span(s, resource, scope));
}

function resourceSpans(r: ProtoReader, out: ReceivedSpan[]): void {
  let resource: AttrMap = {};
  const scopes: ProtoReader[] = [];
  while (!r.done) {
    const { field, wire } = r.key();
    if (field === 1 && wire === WireType.LengthDelimited) resource = keyValues(r.message(), 1);
    else if (field === 2 && wire === WireType.LengthDelimited) scopes.push(r.message());
    else r.skip(wire);
  }
  for (const s of scopes) scopeSpans(s, resource, out);
}

/** Decodes an OTLP `ExportTraceServiceRequest` (protobuf body of `POST /v1/traces`). Throws on malformed input. */
export function decodeProtobufTraces(body: Uint8Array): ReceivedSpan[] {
  const out: ReceivedSpan[] = [];
  const r = new ProtoReader(body);
  while (!r.done) {
    const { field, wire } = r.key();
    if (field === 1 && wire === WireType.LengthDelimited) resourceSpans(r.message(), out);
    else r.skip(wire);
  }
  return out;
}
