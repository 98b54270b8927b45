/** The receiver's view of an exported span: plain JSON-safe data, the same whether it came as protobuf or JSON. */

export type SpanKindName = 'UNSPECIFIED' | 'INTERNAL' | 'SERVER' | 'CLIENT' | 'PRODUCER' | 'CONSUMER';
export type StatusCodeName = 'UNSET' | 'OK' | 'ERROR';

/** OTLP `AnyValue`: int64 values become numbers when safe, else decimal strings; bytes become base64. */
export type AttrValue = string | number | boolean | null | AttrValue[] | { [key: string]: AttrValue };
export type AttrMap = Record<string, AttrValue>;

export interface ReceivedEvent {
  readonly name: string;
  readonly timeUnixNano: string;
  readonly attributes: AttrMap;
}

export interface ReceivedLink {
  readonly traceId: string;
  readonly spanId: string;
  readonly attributes: AttrMap;
}

export interface ReceivedSpan {
  /** 32 lower-case hex digits. */
  readonly traceId: string;
  /** 16 lower-case hex digits. */
  readonly spanId: string;
  /** Absent for a root span. */
  readonly parentSpanId?: string;
  readonly traceState?: string;
  readonly name: string;
  readonly kind: SpanKindName;
  /** Decimal nanoseconds since the epoch (exact). */
  readonly startTimeUnixNano: string;
  readonly endTimeUnixNano: string;
  /** Milliseconds since the epoch (fractional; microsecond precision). */
  readonly startMs: number;
  readonly endMs: number;
  readonly durationMs: number;
  readonly attributes: AttrMap;
  readonly events: readonly ReceivedEvent[];
  readonly links: readonly ReceivedLink[];
  readonly status: { readonly code: StatusCodeName; readonly message?: string };
  readonly resource: AttrMap;
  /** `service.name` of the resource, '' when missing. */
  readonly serviceName: string;
  readonly scope: { readonly name: string; readonly version?: string };
}

const KINDS: readonly SpanKindName[] = ['UNSPECIFIED', 'INTERNAL', 'SERVER', 'CLIENT', 'PRODUCER', 'CONSUMER'];
const STATUSES: readonly StatusCodeName[] = ['UNSET', 'OK', 'ERROR'];

/** OTLP enum (number, or the proto name `SPAN_KIND_SERVER` some JSON encoders use) to a short name. */
export function kindName(value: unknown): SpanKindName {
  if (typeof value === 'number') return KINDS[value] ?? 'UNSPECIFIED';
  if (typeof value === 'string') {
    const short = value.replace(/^SPAN_KIND_/, '') as SpanKindName;
    return KINDS.includes(short) ? short : 'UNSPECIFIED';
  }
  return 'UNSPECIFIED';
}

export function statusName(value: unknown): StatusCodeName {
  if (typeof value === 'number') return STATUSES[value] ?? 'UNSET';
  if (typeof value === 'string') {
    const short = value.replace(/^STATUS_CODE_/, '') as StatusCodeName;
    return STATUSES.includes(short) ? short : 'UNSET';
  }
  return 'UNSET';
}

/** int64 to the friendliest exact JS value. */
export function int64Value(v: bigint): number | string {
  return v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v.toString();
}

/** Nanoseconds to epoch milliseconds, keeping sub-millisecond precision (split so no precision is lost early). */
function nanosToMs(nanos: bigint): number {
  return Number(nanos / 1_000_000n) + Number(nanos % 1_000_000n) / 1e6;
}

/** Fills the derived fields (times in ms, service name) of a span decoded from either encoding. */
export function completeSpan(raw: Omit<ReceivedSpan, 'startMs' | 'endMs' | 'durationMs' | 'serviceName'>): ReceivedSpan {
  const start = BigInt(raw.startTimeUnixNano || '0');
  const end = BigInt(raw.endTimeUnixNano || '0');
  const service = raw.resource['service.name'];
  return {
    ...raw,
    startMs: nanosToMs(start),
    endMs: nanosToMs(end),
    durationMs: nanosToMs(end - start),
    serviceName: typeof service === 'string' ? service : '',
  };
}

/** A valid id is non-empty and not all zeros (OTLP encodes "no parent" as empty bytes or zeros). */
export function presentId(hex: string): string | undefined {
  return hex && !/^0*$/.test(hex) ? hex : undefined;
}
