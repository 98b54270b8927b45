import { z } from 'zod';

const Port = z.coerce.number().int().min(0).max(65535);
const Ms = z.coerce.number().int().min(0);

/** Gateway configuration: flags, with `TRIAD_*` environment variables as defaults. */
export const GatewayConfigSchema = z.object({
  nats: z.string().min(1).default('nats://127.0.0.1:4222'),
  host: z.string().default('0.0.0.0'),
  port: Port.default(8080),
  metricsPort: Port.default(9090),
  /** Largest request body accepted (bytes); larger ones get 413. */
  bodyLimit: z.coerce.number().int().min(1024).default(10 * 1024 * 1024),
  /**
   * Where decisions are made: `service` asks the scheduler replicas over NATS (cluster-wide in-flight counts,
   * one place to run plugins); `in-process` decides in the gateway with the same plugins over the same KV state
   * and every gateway's dispatch events (no scheduling round-trip; each gateway replica pays the scoring CPU).
   */
  scheduling: z.enum(['service', 'in-process']).default('service'),
  /** Wait this long for a scheduling decision before deciding locally. */
  scheduleBudgetMs: Ms.default(50),
  /** After a scheduler failure, decide locally this long before asking the scheduler again. */
  schedulerBackoffMs: Ms.default(1000),
  /** Scheduling requests per NATS message at most. */
  scheduleMaxBatch: z.coerce.number().int().min(1).max(256).default(64),
  /** Scheduling messages in flight at once. */
  scheduleMaxInFlight: z.coerce.number().int().min(1).max(64).default(4),
  encodeTimeoutMs: Ms.default(30_000),
  prefillTimeoutMs: Ms.default(60_000),
  firstByteTimeoutMs: Ms.default(60_000),
  totalTimeoutMs: Ms.default(600_000),
  /** Sockets per engine endpoint. */
  upstreamConnections: z.coerce.number().int().min(1).default(256),
  /** How long a SIGTERM drain lets running requests finish. */
  drainTimeoutMs: Ms.default(30_000),
  /** In-flight snapshot period on `triad.v1.dispatch`. */
  snapshotIntervalMs: z.coerce.number().int().min(1).default(1000),
  /** How long a dispatch event may wait to share a message with later ones (0: end of its event-loop turn). */
  dispatchFlushMs: z.coerce.number().int().min(0).max(1000).default(5),
  /** Write the per-request JSON access log line. */
  accessLog: z.union([z.boolean(), z.enum(['true', 'false', '1', '0'])]).transform((v) => v === true || v === 'true' || v === '1').default(true),
  /** Gateway instance id in dispatch events (defaults to hostname-pid). */
  instanceId: z.string().optional(),
  /** Admission control config file (API keys, JWT, token rate limits, fair queue; libs/admission), hot-reloaded. */
  admissionConfig: z.string().min(1).optional(),
});
export type GatewayConfig = z.infer<typeof GatewayConfigSchema>;
export type GatewayConfigInput = z.input<typeof GatewayConfigSchema>;

/** Environment variable of each setting (the flag names are the kebab-case keys). */
export const CONFIG_ENV: Readonly<Record<keyof GatewayConfig, string>> = {
  nats: 'TRIAD_NATS_URL',
  host: 'TRIAD_HOST',
  port: 'TRIAD_PORT',
  metricsPort: 'TRIAD_METRICS_PORT',
  bodyLimit: 'TRIAD_BODY_LIMIT',
  scheduling: 'TRIAD_SCHEDULING',
  scheduleBudgetMs: 'TRIAD_SCHEDULE_BUDGET_MS',
  schedulerBackoffMs: 'TRIAD_SCHEDULER_BACKOFF_MS',
  scheduleMaxBatch: 'TRIAD_SCHEDULE_MAX_BATCH',
  scheduleMaxInFlight: 'TRIAD_SCHEDULE_MAX_IN_FLIGHT',
  encodeTimeoutMs: 'TRIAD_ENCODE_TIMEOUT_MS',
  prefillTimeoutMs: 'TRIAD_PREFILL_TIMEOUT_MS',
  firstByteTimeoutMs: 'TRIAD_FIRST_BYTE_TIMEOUT_MS',
  totalTimeoutMs: 'TRIAD_TOTAL_TIMEOUT_MS',
  upstreamConnections: 'TRIAD_UPSTREAM_CONNECTIONS',
  drainTimeoutMs: 'TRIAD_DRAIN_TIMEOUT_MS',
  snapshotIntervalMs: 'TRIAD_SNAPSHOT_INTERVAL_MS',
  dispatchFlushMs: 'TRIAD_DISPATCH_FLUSH_MS',
  accessLog: 'TRIAD_ACCESS_LOG',
  instanceId: 'TRIAD_INSTANCE_ID',
  admissionConfig: 'TRIAD_ADMISSION_CONFIG',
};

/** Builds the config from explicit values over environment variables over defaults; throws with the field named. */
export function resolveConfig(values: Partial<Record<keyof GatewayConfig, unknown>>, env: NodeJS.ProcessEnv = process.env): GatewayConfig {
  const merged: Record<string, unknown> = {};
  for (const key of Object.keys(CONFIG_ENV) as (keyof GatewayConfig)[]) {
    const value = values[key] ?? env[CONFIG_ENV[key]];
    if (value !== undefined && value !== '') merged[key] = value;
  }
  const parsed = GatewayConfigSchema.safeParse(merged);
  if (!parsed.success) throw new Error(`invalid gateway configuration: ${z.prettifyError(parsed.error)}`);
  return parsed.data;
}
