/**
 * Reads the standard OpenTelemetry environment variables into one plain object. Pure (no SDK loaded), so the
 * effective configuration is testable and can be logged at start-up.
 */

export type ServiceName = 'triad-gateway' | 'triad-scheduler' | 'triad-pod-watcher';

export type SamplerName =
  'always_on' | 'always_off' | 'traceidratio' | 'parentbased_always_on' | 'parentbased_always_off' | 'parentbased_traceidratio';

const SAMPLERS: readonly SamplerName[] = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
];

export interface BatchConfig {
  /** Spans held while waiting for export; beyond it new spans are dropped (never blocks `span.end()`). */
  readonly maxQueueSize: number;
  readonly maxExportBatchSize: number;
  readonly scheduledDelayMillis: number;
  readonly exportTimeoutMillis: number;
}

export interface SpanLimitsConfig {
  readonly attributeCountLimit: number;
  /** Longest string attribute value (longer ones are cut); `Infinity` when unset. */
  readonly attributeValueLengthLimit: number;
  readonly eventCountLimit: number;
  readonly linkCountLimit: number;
}

/** Who records spans: the SDK's tracer (`sdk`) or Triad's span recorder (`recorder`); both export through NodeSDK. */
export type SpanRecorderName = 'sdk' | 'recorder';

export interface TelemetryConfig {
  /** True when traces are exported; false means every helper is a no-op and no SDK module is loaded. */
  readonly enabled: boolean;
  /** Why tracing is off (for the start-up log line), when it is. */
  readonly disabledReason?: string;
  readonly serviceName: string;
  /** Full URL of the OTLP/HTTP traces endpoint (`…/v1/traces`). */
  readonly tracesUrl: string;
  /** Per-export HTTP timeout (the exporter retries inside it). */
  readonly exportTimeoutMs: number;
  readonly sampler: SamplerName;
  /** Ratio for the `*traceidratio` samplers, in [0, 1]. */
  readonly samplerRatio: number;
  readonly batch: BatchConfig;
  /** `OTEL_SPAN_*_LIMIT` / `OTEL_ATTRIBUTE_*_LIMIT` (the SDK's defaults: 128 attributes, events and links; no length limit). */
  readonly spanLimits: SpanLimitsConfig;
  /** Resource attributes from `OTEL_RESOURCE_ATTRIBUTES` and the downward-API env, before the service name. */
  readonly resourceAttributes: Readonly<Record<string, string>>;
  /** `TRIAD_TRACE_RECORDER`: which span implementation records (benchmarks compare them). */
  readonly spanRecorder: SpanRecorderName;
  /** Problems found in the env (invalid values replaced by defaults), for a warning at start-up. */
  readonly warnings: readonly string[];
}

type Env = Readonly<Record<string, string | undefined>>;

const DEFAULT_ENDPOINT = 'http://localhost:4318';

function text(env: Env, name: string): string | undefined {
  const v = env[name]?.trim();
  return v ? v : undefined;
}

/** An integer variable of at least `min` (1: "positive", 0: "non-negative"); anything else warns and falls back. */
function intAtLeast(min: 0 | 1, env: Env, name: string, fallback: number, warnings: string[]): number {
  const raw = text(env, name);
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (Number.isInteger(n) && n >= min) return n;
  warnings.push(`${name}=${raw} is not a ${min === 1 ? 'positive' : 'non-negative'} integer; using ${fallback}`);
  return fallback;
}

const positiveInt = (env: Env, name: string, fallback: number, warnings: string[]) => intAtLeast(1, env, name, fallback, warnings);
const nonNegativeInt = (env: Env, name: string, fallback: number, warnings: string[]) => intAtLeast(0, env, name, fallback, warnings);

/** Span limits with the spec's precedence: the `OTEL_SPAN_*` variable, then the general `OTEL_ATTRIBUTE_*` one. */
function spanLimits(env: Env, warnings: string[]): SpanLimitsConfig {
  const count = nonNegativeInt(env, 'OTEL_ATTRIBUTE_COUNT_LIMIT', 128, warnings);
  const length = nonNegativeInt(env, 'OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT', Infinity, warnings);
  return {
    attributeCountLimit: nonNegativeInt(env, 'OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT', count, warnings),
    attributeValueLengthLimit: nonNegativeInt(env, 'OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT', length, warnings),
    eventCountLimit: nonNegativeInt(env, 'OTEL_SPAN_EVENT_COUNT_LIMIT', 128, warnings),
    linkCountLimit: nonNegativeInt(env, 'OTEL_SPAN_LINK_COUNT_LIMIT', 128, warnings),
  };
}

function truthy(env: Env, name: string): boolean {
  return text(env, name)?.toLowerCase() === 'true';
}

/** Parses `key1=value1,key2=value2` with percent-encoded values (the W3C Baggage-like format the spec uses). */
export function parseKeyValueList(
  raw: string | undefined,
  warnings: string[] = [],
  what = 'OTEL_RESOURCE_ATTRIBUTES',
): Record<string, string> {
  const out: Record<string, string> = {};
  if (!raw) return out;
  for (const part of raw.split(',')) {
    if (!part.trim()) continue;
    const eq = part.indexOf('=');
    const key = eq > 0 ? part.slice(0, eq).trim() : '';
    if (!key) {
      warnings.push(`${what}: ignored '${part.trim()}' (expected key=value)`);
      continue;
    }
    const value = part.slice(eq + 1).trim();
    try {
      out[key] = decodeURIComponent(value);
    } catch {
      out[key] = value;
    }
  }
  return out;
}

/**
 * The traces URL: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` as given, else `OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/traces`
 * (the spec's rule for the http exporters), else localhost:4318.
 */
function tracesUrl(env: Env): string {
  const signal = text(env, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT');
  if (signal) return signal;
  const base = text(env, 'OTEL_EXPORTER_OTLP_ENDPOINT') ?? DEFAULT_ENDPOINT;
  return `${base.replace(/\/+$/, '')}/v1/traces`;
}

/**
 * Why tracing stays off, or undefined when it is on. Deviation from the SDK default (export to localhost:4318
 * whenever not disabled): Triad exports only when an OTLP endpoint is configured, so a service without a collector
 * pays nothing and does not retry into a closed port. `OTEL_TRACES_EXPORTER=otlp` forces the default endpoint.
 */
function offReason(env: Env): string | undefined {
  if (truthy(env, 'OTEL_SDK_DISABLED')) return 'OTEL_SDK_DISABLED=true';
  const exporter = text(env, 'OTEL_TRACES_EXPORTER')?.toLowerCase();
  if (exporter === 'none') return 'OTEL_TRACES_EXPORTER=none';
  if (exporter === 'otlp') return undefined;
  if (text(env, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT') || text(env, 'OTEL_EXPORTER_OTLP_ENDPOINT')) return undefined;
  return 'no OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT set';
}

function sampler(env: Env, warnings: string[]): { sampler: SamplerName; samplerRatio: number } {
  const raw = text(env, 'OTEL_TRACES_SAMPLER')?.toLowerCase();
  let name: SamplerName = 'parentbased_always_on';
  if (raw !== undefined) {
    if ((SAMPLERS as readonly string[]).includes(raw)) name = raw as SamplerName;
    else warnings.push(`OTEL_TRACES_SAMPLER=${raw} is not supported; using parentbased_always_on`);
  }
  let ratio = 1;
  const arg = text(env, 'OTEL_TRACES_SAMPLER_ARG');
  if (arg !== undefined && name.endsWith('traceidratio')) {
    const n = Number(arg);
    if (Number.isFinite(n) && n >= 0 && n <= 1) ratio = n;
    else warnings.push(`OTEL_TRACES_SAMPLER_ARG=${arg} is not a ratio in [0, 1]; using 1`);
  }
  return { sampler: name, samplerRatio: ratio };
}

const DEFAULT_SPAN_RECORDER: SpanRecorderName = 'recorder';

function spanRecorder(env: Env, warnings: string[]): SpanRecorderName {
  const raw = text(env, 'TRIAD_TRACE_RECORDER')?.toLowerCase();
  if (raw === undefined) return DEFAULT_SPAN_RECORDER;
  if (raw === 'sdk' || raw === 'recorder') return raw;
  warnings.push(`TRIAD_TRACE_RECORDER=${raw} is not sdk or recorder; using ${DEFAULT_SPAN_RECORDER}`);
  return DEFAULT_SPAN_RECORDER;
}

/** Downward-API env (set in the Deployment from `metadata.name` / `metadata.namespace` / `spec.nodeName`). */
function kubernetesAttributes(env: Env): Record<string, string> {
  const out: Record<string, string> = {};
  const pod = text(env, 'POD_NAME');
  const ns = text(env, 'POD_NAMESPACE');
  const node = text(env, 'NODE_NAME');
  if (pod) {
    out['k8s.pod.name'] = pod;
    out['service.instance.id'] = pod;
  }
  if (ns) out['k8s.namespace.name'] = ns;
  if (node) out['k8s.node.name'] = node;
  return out;
}

/**
 * Service name precedence (the spec's): `OTEL_SERVICE_NAME`, then `service.name` in `OTEL_RESOURCE_ATTRIBUTES`,
 * then the name the app passes.
 */
export function readTelemetryConfig(serviceName: string, env: Env = process.env): TelemetryConfig {
  const warnings: string[] = [];
  const fromEnv = parseKeyValueList(text(env, 'OTEL_RESOURCE_ATTRIBUTES'), warnings);
  const resourceAttributes = { ...kubernetesAttributes(env), ...fromEnv };
  const reason = offReason(env);
  const exportTimeoutMs = positiveInt(
    env,
    'OTEL_EXPORTER_OTLP_TRACES_TIMEOUT',
    positiveInt(env, 'OTEL_EXPORTER_OTLP_TIMEOUT', 10_000, warnings),
    warnings,
  );
  const maxQueueSize = positiveInt(env, 'OTEL_BSP_MAX_QUEUE_SIZE', 2048, warnings);
  return {
    enabled: reason === undefined,
    ...(reason === undefined ? {} : { disabledReason: reason }),
    serviceName: text(env, 'OTEL_SERVICE_NAME') ?? fromEnv['service.name'] ?? serviceName,
    tracesUrl: tracesUrl(env),
    exportTimeoutMs,
    ...sampler(env, warnings),
    batch: {
      maxQueueSize,
      maxExportBatchSize: Math.min(positiveInt(env, 'OTEL_BSP_MAX_EXPORT_BATCH_SIZE', 512, warnings), maxQueueSize),
      scheduledDelayMillis: positiveInt(env, 'OTEL_BSP_SCHEDULE_DELAY', 5000, warnings),
      exportTimeoutMillis: positiveInt(env, 'OTEL_BSP_EXPORT_TIMEOUT', 30_000, warnings),
    },
    spanLimits: spanLimits(env, warnings),
    resourceAttributes,
    spanRecorder: spanRecorder(env, warnings),
    warnings,
  };
}
