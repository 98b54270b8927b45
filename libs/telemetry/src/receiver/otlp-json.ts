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

// OTLP/JSON is the protobuf JSON mapping with lowerCamelCase keys, enums as numbers, int64 as strings (or
// numbers) and trace/span ids as hex (the OTLP spec's exception to the base64 rule for bytes). Input is
// untrusted, so every field is type-checked and anything unexpected is ignored rather than trusted.

type Json = Record<string, unknown>;

function obj(v: unknown): Json {
  return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Json) : {};
}

function list(v: unknown): unknown[] {
  return Array.isArray(v) ? v : [];
}

function str(v: unknown): string {
  return typeof v === 'string' ? v : '';
}

/** Ids are hex per the spec; base64 (a generic protobuf-JSON encoder's choice) is converted too. */
function id(v: unknown, bytes: number): string {
  const s = str(v);
  if (s === '' || new RegExp(`^[0-9a-fA-F]{${bytes * 2}}$`).test(s)) return s.toLowerCase();
  const decoded = Buffer.from(s, 'base64');
  return decoded.length === bytes ? decoded.toString('hex') : s;
}

/** A uint64/int64 that JSON may carry as a string or a number. */
function nanos(v: unknown): string {
  if (typeof v === 'string' && /^\d+$/.test(v)) return v;
  if (typeof v === 'number' && Number.isFinite(v)) return BigInt(Math.trunc(v)).toString();
  return '0';
}

function anyValue(v: unknown): AttrValue {
  const o = obj(v);
  if ('stringValue' in o) return str(o['stringValue']);
  if ('boolValue' in o) return o['boolValue'] === true;
  if ('intValue' in o) {
    const raw = o['intValue'];
    if (typeof raw === 'number') return raw;
    if (typeof raw === 'string' && /^-?\d+$/.test(raw)) return int64Value(BigInt(raw));
    return null;
  }
  if ('doubleValue' in o) return typeof o['doubleValue'] === 'number' ? o['doubleValue'] : Number(o['doubleValue']);
  if ('arrayValue' in o) return list(obj(o['arrayValue'])['values']).map(anyValue);
  if ('kvlistValue' in o) return attributes(obj(o['kvlistValue'])['values']);
  if ('bytesValue' in o) return str(o['bytesValue']);
  return null;
}

function attributes(v: unknown): AttrMap {
  const out: AttrMap = {};
  for (const kv of list(v)) {
    const o = obj(kv);
    if (typeof o['key'] === 'string') out[o['key']] = anyValue(o['value']);
  }
  return out;
}

function span(v: unknown, resource: AttrMap, scope: ReceivedSpan['scope']): ReceivedSpan {
  const s = obj(v);
  const parentSpanId = presentId(id(s['parentSpanId'], 8));
  const traceState = str(s['traceState']);
  const st = obj(s['status']);
  const message = str(st['message']);
  const events: ReceivedEvent[] = list(s['events']).map((e) => ({
    name: str(obj(e)['name']),
    timeUnixNano: nanos(obj(e)['timeUnixNano']),
    attributes: attributes(obj(e)['attributes']),
  }));
  const links: ReceivedLink[] = list(s['links']).map((l) => ({
    traceId: id(obj(l)['traceId'], 16),
    spanId: id(obj(l)['spanId'], 8),
    attributes: attributes(obj(l)['attributes']),
  }));
  return completeSpan({
    traceId: id(s['traceId'], 16),
    spanId: id(s['spanId'], 8),
    ...(parentSpanId ? { parentSpanId } : {}),
    ...(traceState ? { traceState } : {}),
    name: str(s['name']),
    kind: kindName(s['kind']),
    startTimeUnixNano: nanos(s['startTimeUnixNano']),
    endTimeUnixNano: nanos(s['endTimeUnixNano']),
    attributes: attributes(s['attributes']),
    events,
    links,
    status: message ? { code: statusName(st['code']), message } : { code: statusName(st['code']) },
    resource,
    scope,
  });
}

/** Decodes an OTLP/JSON `ExportTraceServiceRequest`. Throws only when the body is not JSON. */
export function decodeJsonTraces(body: string): ReceivedSpan[] {
  const root = obj(JSON.parse(body));
  const out: ReceivedSpan[] = [];
  for (const rs of list(root['resourceSpans'])) {
    const resource = attributes(obj(obj(rs)['resource'])['attributes']);
    for (const ss of list(obj(rs)['scopeSpans'])) {
      const sc = obj(obj(ss)['scope']);
      const version = str(sc['version']);
      const scope = version ? { name: str(sc['name']), version } : { name: str(sc['name']) };
      for (const s of list(obj(ss)['spans'])) out.push(span(s, resource, scope));
    }
  }
  return out;
}
