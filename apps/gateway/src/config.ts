import { z } from 'zod';
import { SchedulingLimits } from '@triad/bus';
import { DEFAULT_UPSTREAM_CONNECTIONS } from '@triad/connectors';
import { DEFAULT_REQUEST_LIMITS, DEFAULT_STAGE_TIMEOUTS, type RequestLimits } from '@triad/request';
import { NatsSettings, OpsSettings, Setting, resolveSettings, type SettingSources } from '@triad/runtime';

const Ms = Setting.ms(0);

/**
 * Open connections per client address by default: far above what one client needs (HTTP/1.1 clients open one per
 * concurrent request), so a proxy in front that does not keep client addresses is not refused at ordinary loads.
 */
export const DEFAULT_MAX_CONNECTIONS_PER_CLIENT = 1024;

/** Gateway configuration: flags over `TRIAD_*` environment variables over a settings file over defaults. */
const GatewayConfigFields = z.object({
  nats: NatsSettings.servers().default(NatsSettings.defaultUrl),
  /** JetStream replicas of the KV buckets this service creates (3 on a 3-node NATS cluster). */
  kvReplicas: NatsSettings.kvReplicas().default(1),
  host: z.string().default('0.0.0.0'),
  port: Setting.port().default(8080),
  metricsPort: Setting.port().default(9090),
  metricsHost: OpsSettings.host(),
  /**
   * Open connections one client address may hold (0: no cap); one more is answered 429
   * (`GATEWAY_TOO_MANY_CONNECTIONS`) and closed. The address is the socket's peer: behind a proxy or load balancer
   * that does not keep client addresses, every client shares the proxy's, and this bounds the proxy's connections.
   */
  maxConnectionsPerClient: Setting.count(0, 1_000_000).default(DEFAULT_MAX_CONNECTIONS_PER_CLIENT),
  /** A request head not complete this long after its first byte (or the connection's opening) gets 408 and the close. */
  headersTimeoutMs: Setting.ms(1).default(10_000),
  /**
   * A request (head and body) not received this long after its first byte gets 408 and the close: node's
   * `requestTimeout`, which times receiving only, never the answer (a stream runs as long as it runs). node's own
   * 300 s: a large body (images inlined as base64, up to the body limit) from a slow client must still arrive; the
   * header timeout is what cuts a client that never finishes its head.
   */
  requestReceiveTimeoutMs: Setting.ms(1).default(300_000),
  /**
   * How long a client connection may stay idle between requests. Above the idle timeout of the proxies and load
   * balancers in front (commonly 60 s), so they close idle connections first and never send on one closing here.
   */
  keepAliveTimeoutMs: Setting.ms(1).default(75_000),
  /** Largest request body accepted (bytes); larger ones get 413. */
  bodyLimit: Setting.bytes(1024).default(10 * 1024 * 1024),
  /** Bytes of an oversized body read and dropped before the 413 goes out (so a client still sending reads it). */
  bodyDiscardLimit: Setting.bytes(0).default(64 * 1024 * 1024),
  /** Deepest JSON nesting a body may have (400 naming the limit beyond it). */
  maxJsonDepth: Setting.count(2, 10_000).default(DEFAULT_REQUEST_LIMITS.maxJsonDepth),
  /** Media items in one chat request; at most what one scheduling request carries. */
  maxMediaItems: Setting.count(0, SchedulingLimits.maxMediaItems).default(DEFAULT_REQUEST_LIMITS.maxMediaItems),
  /** Content parts of any kind in one chat request. */
  maxContentParts: Setting.count(1).default(DEFAULT_REQUEST_LIMITS.maxContentParts),
  /** Characters of the `model` string. */
  maxModelChars: Setting.count(1).default(DEFAULT_REQUEST_LIMITS.maxModelChars),
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
  scheduleMaxBatch: Setting.count(1, 256).default(64),
  /** Scheduling messages in flight at once. */
  scheduleMaxInFlight: Setting.count(1, 64).default(4),
  encodeTimeoutMs: Ms.default(DEFAULT_STAGE_TIMEOUTS.encodeMs),
  prefillTimeoutMs: Ms.default(DEFAULT_STAGE_TIMEOUTS.prefillMs),
  firstByteTimeoutMs: Ms.default(DEFAULT_STAGE_TIMEOUTS.firstByteMs),
  totalTimeoutMs: Ms.default(DEFAULT_STAGE_TIMEOUTS.totalMs),
  /**
   * Requests in flight (one socket each) per engine endpoint, unless its ModelServer sets
   * `connectionPool.maxConnections`; more wait in the gateway (`triad_gateway_upstream_waiting`) within the stage
   * budget. Well above an engine's batch, so the queue normally forms inside the engine, where it is scraped.
   */
  upstreamConnections: Setting.count(1, 65536).default(DEFAULT_UPSTREAM_CONNECTIONS),
  /** How long a SIGTERM drain lets running requests finish. */
  drainTimeoutMs: Ms.default(30_000),
  /** In-flight snapshot period on `triad.v1.dispatch`. */
  snapshotIntervalMs: Setting.ms(1).default(1000),
  /** How long a dispatch event may wait to share a message with later ones (0: end of its event-loop turn). */
  dispatchFlushMs: Setting.ms(0, 1000).default(5),
  /**
   * How dispatch events are written: `packed` (the batch's `packed` legs) or `events` (one object per event, what
   * schedulers from before `packed` read: for a rolling upgrade that replaces gateways before schedulers).
   */
  dispatchWire: z.enum(['packed', 'events']).default('packed'),
  /** Write the per-request JSON access log line. */
  accessLog: Setting.boolean().default(true),
  /**
   * vLLM PD/EPD: when a decode did not take the KV a prefill kept for it (the client left, the decode failed), send
   * a one-token release leg that makes a decode read it, so the prefill frees it now rather than at its timeout.
   */
  kvRelease: Setting.boolean().default(true),
  /**
   * Where the engine credentials ModelServers name live (`spec.engineAuth.credential`): `<dir>/<namespace>/<name>`,
   * typically Secret keys mounted into the gateway pods.
   */
  engineCredentialsDir: z.string().min(1).default('/etc/triad/engine-credentials'),
  /** Gateway instance id in dispatch events (defaults to hostname-pid). */
  instanceId: z.string().optional(),
  /** Tries after the first for an ExternalModelProvider call (transport failure, timeout, 502/503/504; before any byte). */
  providerRetries: Setting.count(0, 10).default(2),
  providerRetryIntervalMs: Ms.default(200),
  /** The key the pod-watcher seals provider credentials with (a mounted Secret); else TRIAD_CREDENTIALS_KEY. */
  credentialsKeyFile: z.string().min(1).optional(),
  /**
   * Gateway API mode (Kthena's `--enable-gateway-api`): serve the Gateway listeners and HTTPRoutes the
   * pod-watcher (`--gateway-api`) publishes; ModelRoutes with parentRefs attach to those listeners.
   */
  gatewayApi: Setting.boolean().default(false),
  /** Admission control config file (API keys, JWT, token rate limits, fair queue; libs/admission), hot-reloaded. */
  admissionConfig: Setting.file().optional(),
  /**
   * The scheduler's `--config` file, when the scheduler runs with one: the gateway hashes prompts as its prefix
   * scorers expect (block sizes, engine block keys) and its local fallback decides with the same plugins. The KV
   * config (`triad_v1_config/scheduler`) overrides it, as it does in the scheduler.
   */
  schedulerConfig: Setting.file().optional(),
});

/** The settings checked together: node refuses a header timeout over the request timeout (which covers the head too). */
const GatewayConfigSchema = GatewayConfigFields.superRefine((config, ctx) => {
  if (config.headersTimeoutMs > config.requestReceiveTimeoutMs) {
    ctx.addIssue({
      code: 'custom',
      path: ['headersTimeoutMs'],
      message:
        `${config.headersTimeoutMs} ms is longer than request-receive-timeout-ms (${config.requestReceiveTimeoutMs} ms), ` +
        'which times the whole request, head included',
    });
  }
});
export type GatewayConfig = z.infer<typeof GatewayConfigSchema>;

/** The flag / settings-file name and environment variable of each setting. */
export const CONFIG_SOURCES: SettingSources<GatewayConfig> = {
  nats: NatsSettings.sources.nats,
  kvReplicas: NatsSettings.sources.kvReplicas,
  host: { name: 'host', env: 'TRIAD_HOST' },
  port: { name: 'port', env: 'TRIAD_PORT' },
  metricsPort: { name: 'metrics-port', env: 'TRIAD_METRICS_PORT' },
  metricsHost: OpsSettings.sources.metricsHost,
  maxConnectionsPerClient: { name: 'max-connections-per-client', env: 'TRIAD_MAX_CONNECTIONS_PER_CLIENT' },
  headersTimeoutMs: { name: 'headers-timeout-ms', env: 'TRIAD_HEADERS_TIMEOUT_MS' },
  requestReceiveTimeoutMs: { name: 'request-receive-timeout-ms', env: 'TRIAD_REQUEST_RECEIVE_TIMEOUT_MS' },
  keepAliveTimeoutMs: { name: 'keep-alive-timeout-ms', env: 'TRIAD_KEEP_ALIVE_TIMEOUT_MS' },
  bodyLimit: { name: 'body-limit', env: 'TRIAD_BODY_LIMIT' },
  bodyDiscardLimit: { name: 'body-discard-limit', env: 'TRIAD_BODY_DISCARD_LIMIT' },
  maxJsonDepth: { name: 'max-json-depth', env: 'TRIAD_MAX_JSON_DEPTH' },
  maxMediaItems: { name: 'max-media-items', env: 'TRIAD_MAX_MEDIA_ITEMS' },
  maxContentParts: { name: 'max-content-parts', env: 'TRIAD_MAX_CONTENT_PARTS' },
  maxModelChars: { name: 'max-model-chars', env: 'TRIAD_MAX_MODEL_CHARS' },
  scheduling: { name: 'scheduling', env: 'TRIAD_SCHEDULING' },
  scheduleBudgetMs: { name: 'schedule-budget-ms', env: 'TRIAD_SCHEDULE_BUDGET_MS' },
  schedulerBackoffMs: { name: 'scheduler-backoff-ms', env: 'TRIAD_SCHEDULER_BACKOFF_MS' },
  scheduleMaxBatch: { name: 'schedule-max-batch', env: 'TRIAD_SCHEDULE_MAX_BATCH' },
  scheduleMaxInFlight: { name: 'schedule-max-in-flight', env: 'TRIAD_SCHEDULE_MAX_IN_FLIGHT' },
  encodeTimeoutMs: { name: 'encode-timeout-ms', env: 'TRIAD_ENCODE_TIMEOUT_MS' },
  prefillTimeoutMs: { name: 'prefill-timeout-ms', env: 'TRIAD_PREFILL_TIMEOUT_MS' },
  firstByteTimeoutMs: { name: 'first-byte-timeout-ms', env: 'TRIAD_FIRST_BYTE_TIMEOUT_MS' },
  totalTimeoutMs: { name: 'total-timeout-ms', env: 'TRIAD_TOTAL_TIMEOUT_MS' },
  upstreamConnections: { name: 'upstream-connections', env: 'TRIAD_UPSTREAM_CONNECTIONS' },
  drainTimeoutMs: { name: 'drain-timeout-ms', env: 'TRIAD_DRAIN_TIMEOUT_MS' },
  snapshotIntervalMs: { name: 'snapshot-interval-ms', env: 'TRIAD_SNAPSHOT_INTERVAL_MS' },
  dispatchFlushMs: { name: 'dispatch-flush-ms', env: 'TRIAD_DISPATCH_FLUSH_MS' },
  dispatchWire: { name: 'dispatch-wire', env: 'TRIAD_DISPATCH_WIRE' },
  accessLog: { name: 'access-log', env: 'TRIAD_ACCESS_LOG' },
  kvRelease: { name: 'kv-release', env: 'TRIAD_KV_RELEASE' },
  engineCredentialsDir: { name: 'engine-credentials-dir', env: 'TRIAD_ENGINE_CREDENTIALS_DIR' },
  instanceId: { name: 'instance-id', env: 'TRIAD_INSTANCE_ID' },
  admissionConfig: { name: 'admission-config', env: 'TRIAD_ADMISSION_CONFIG' },
  schedulerConfig: { name: 'scheduler-config', env: 'TRIAD_SCHEDULER_CONFIG' },
  providerRetries: { name: 'provider-retries', env: 'TRIAD_PROVIDER_RETRIES' },
  providerRetryIntervalMs: { name: 'provider-retry-interval-ms', env: 'TRIAD_PROVIDER_RETRY_INTERVAL_MS' },
  credentialsKeyFile: { name: 'credentials-key-file', env: 'TRIAD_CREDENTIALS_KEY_FILE' },
  gatewayApi: { name: 'gateway-api', env: 'TRIAD_GATEWAY_API' },
};

/**
 * Builds the config from explicit values (flags) over environment variables over a settings file (`file`, else
 * `TRIAD_SETTINGS_FILE`) over defaults; throws a ConfigError naming each bad setting's flag, variable or file.
 */
export function resolveConfig(
  values: Partial<Record<keyof GatewayConfig, unknown>>,
  env: NodeJS.ProcessEnv = process.env,
  file?: string,
): GatewayConfig {
  return resolveSettings('gateway', GatewayConfigSchema, CONFIG_SOURCES, { flags: values, env, ...(file === undefined ? {} : { file }) });
}

/** The request bounds of a gateway config. */
export function requestLimitsOf(config: GatewayConfig): RequestLimits {
  return {
    maxJsonDepth: config.maxJsonDepth,
    maxMediaItems: config.maxMediaItems,
    maxContentParts: config.maxContentParts,
    maxModelChars: config.maxModelChars,
  };
}
