import { hostname } from 'node:os';
import { z } from 'zod';
import { NatsSettings, OpsSettings, Setting, resolveSettings, type SettingSources } from '@triad/runtime';

const Ms = Setting.ms;

/** `kube`, or `file:PATH` (multi-document YAML of ModelServers, ModelRoutes and Pods). */
export type SourceSpec = { readonly kind: 'kube' } | { readonly kind: 'file'; readonly path: string };

const SourceSchema = z.string().transform((text, ctx): SourceSpec => {
  if (text === 'kube') return { kind: 'kube' };
  if (text.startsWith('file:') && text.length > 'file:'.length) return { kind: 'file', path: text.slice('file:'.length) };
  ctx.addIssue({ code: 'custom', message: `must be 'kube' or 'file:PATH', got '${text}'` });
  return z.NEVER;
});

/** `NS/NAME:PORT` of the default Gateway, or `none`. */
export type DefaultGatewaySpec = { readonly namespace: string; readonly name: string; readonly port: number } | undefined;

const DefaultGatewaySchema = z.string().transform((text, ctx): DefaultGatewaySpec => {
  if (text === 'none') return undefined;
  const m = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?)\/([a-z0-9]([-a-z0-9.]*[a-z0-9])?):(\d{1,5})$/.exec(text);
  const port = Number(m?.[5]);
  if (!m || port < 1 || port > 65535) {
    ctx.addIssue({ code: 'custom', message: `must be NAMESPACE/NAME:PORT or 'none', got '${text}'` });
    return z.NEVER;
  }
  return { namespace: m[1], name: m[3], port };
});

/** Pod-watcher settings: flags over `TRIAD_*` environment variables over a settings file over defaults. */
const WatcherConfigSchema = z.object({
  nats: NatsSettings.servers().default(NatsSettings.defaultUrl),
  /** JetStream replicas of the KV buckets this service creates (3 on a 3-node NATS cluster). */
  kvReplicas: NatsSettings.kvReplicas().default(1),
  source: SourceSchema.default({ kind: 'kube' }),
  /** Namespaces to watch (kube source); empty means all namespaces. */
  namespaces: z.array(z.string().min(1)).default([]),
  /** Kubeconfig file; without it, KUBECONFIG, ~/.kube/config or the in-cluster service account. */
  kubeconfig: z.string().optional(),
  metricsPort: Setting.port().default(9092),
  metricsHost: OpsSettings.host(),
  /** How often each endpoint's /metrics is scraped. */
  scrapeIntervalMs: Ms(50).default(1000),
  /** Per-request timeout of a scrape (metrics or models). */
  scrapeTimeoutMs: Ms(10).default(2000),
  /** Scrapes in flight at once, across all endpoints. */
  scrapeConcurrency: Setting.count(1, 1024).default(64),
  /**
   * How often GET /v1/models is refreshed per endpoint (new endpoints are asked at once, and a failing engine again
   * with the scrape after it answers again). The list only changes when adapters are loaded or unloaded at runtime,
   * and only the optional lora-affinity filter reads it; each read is a request beside the scrape (at 5 s, a sixth
   * of all requests and a quarter of the scraping CPU).
   */
  modelsIntervalMs: Ms(50).default(15_000),
  /**
   * How often this replica publishes its scrape freshness: the time until which every endpoint record it wrote is
   * known current, one KV write however many engines it scrapes (keep it well below the scheduler's stale-metrics
   * bound, 10 s by default). An engine whose numbers do not change is not rewritten.
   */
  metricsHeartbeatMs: Ms(100).default(2000),
  /**
   * Also rewrite an endpoint record whose numbers did not change this often (0: after every scrape; unset: never),
   * refreshing its own `scrapedAt`: only for schedulers and gateways older than scrape freshness, e.g. while a
   * rolling upgrade runs. Costs one write per engine per period.
   */
  recordHeartbeatMs: Ms(0).optional(),
  /** Period of the SGLang EPD encoder-registry reconcile (changes are applied at once as well). */
  registryIntervalMs: Ms(50).optional(),
  /**
   * SGLang's evicted TTL (`SGLANG_ENCODER_BOOTSTRAP_EVICTED_TTL`, 600 s): an encoder SGLang evicted for failing
   * health checks is registered again only after this long (SGLang has then forgotten it), never sooner.
   */
  registryEvictedTtlMs: Ms(0).default(600_000),
  /** Encoders per language-only server's registry: 0 = every eligible encoder; N spreads N per registry. */
  encodersPerPrefill: Setting.count(0, 10_000).default(0),
  /** How often each SGLang engine's `/server_info` is re-read (also at once after an engine answers again). */
  serverInfoIntervalMs: Ms(100).default(30_000),
  /** Writer lease in NATS KV: a replica that has not renewed it for this long is replaced by another. */
  leaseTtlMs: Ms(300).default(5000),
  /** This replica's name in the lease (TRIAD_IDENTITY, else POD_NAME, else hostname-pid). */
  identity: z
    .string()
    .min(1)
    .default(() => `${hostname()}-${process.pid}`),
  /** Longest time a SIGTERM shutdown may take. */
  drainTimeoutMs: Ms(0).default(10_000),
  /** Kthena's `--enable-gateway-api`: watch Gateways, HTTPRoutes, InferencePools (and Namespaces) too. */
  gatewayApi: Setting.boolean().default(false),
  /** GatewayClass names whose Gateways are Triad's (Kthena's is `kthena-router`). */
  gatewayClasses: z.array(z.string().min(1)).default(['kthena-router', 'triad']),
  /**
   * The default Gateway (Kthena's router creates one, `default` in its namespace, listening on its port): a
   * record Triad publishes, not an object it creates. `none` to have only real Gateways.
   */
  // A prefault, not a default: zod's default would also replace the `undefined` that `none` turns into.
  defaultGateway: DefaultGatewaySchema.prefault('default/default:8080'),
  /** Scrape-shard heartbeat period: a replica not heard for three of them leaves the shards (hand-over). */
  shardHeartbeatMs: Setting.ms(50).default(1000),
  /** File holding the key provider credentials are sealed with for the gateway (a mounted Secret). */
  credentialsKeyFile: z.string().optional(),
  /**
   * The gateway's engine credentials dir (`spec.engineAuth.credential`: `<dir>/<namespace>/<name>`), mounted here
   * too so the watcher's own engine reads (`/v1/models`, `/server_info`) carry those keys. Unset: they carry none.
   */
  engineCredentialsDir: z.string().min(1).optional(),
});
export type WatcherConfig = z.infer<typeof WatcherConfigSchema>;

/**
 * The flag / settings-file name and environment variable of each setting (the kube client reads KUBECONFIG
 * itself, so `--kubeconfig` has no variable here).
 */
export const CONFIG_SOURCES: SettingSources<WatcherConfig> = {
  nats: NatsSettings.sources.nats,
  kvReplicas: NatsSettings.sources.kvReplicas,
  source: { name: 'source', env: 'TRIAD_SOURCE' },
  namespaces: { name: 'namespace', env: 'TRIAD_NAMESPACES', list: true },
  kubeconfig: { name: 'kubeconfig' },
  metricsPort: { name: 'metrics-port', env: 'TRIAD_METRICS_PORT' },
  metricsHost: OpsSettings.sources.metricsHost,
  scrapeIntervalMs: { name: 'scrape-interval', env: 'TRIAD_SCRAPE_INTERVAL_MS' },
  scrapeTimeoutMs: { name: 'scrape-timeout', env: 'TRIAD_SCRAPE_TIMEOUT_MS' },
  scrapeConcurrency: { name: 'scrape-concurrency', env: 'TRIAD_SCRAPE_CONCURRENCY' },
  modelsIntervalMs: { name: 'models-interval', env: 'TRIAD_MODELS_INTERVAL_MS' },
  metricsHeartbeatMs: { name: 'metrics-heartbeat', env: 'TRIAD_METRICS_HEARTBEAT_MS' },
  recordHeartbeatMs: { name: 'record-heartbeat', env: 'TRIAD_RECORD_HEARTBEAT_MS' },
  registryIntervalMs: { name: 'registry-interval', env: 'TRIAD_REGISTRY_INTERVAL_MS' },
  registryEvictedTtlMs: { name: 'registry-evicted-ttl', env: 'TRIAD_REGISTRY_EVICTED_TTL_MS' },
  encodersPerPrefill: { name: 'encoders-per-prefill', env: 'TRIAD_ENCODERS_PER_PREFILL' },
  serverInfoIntervalMs: { name: 'server-info-interval', env: 'TRIAD_SERVER_INFO_INTERVAL_MS' },
  leaseTtlMs: { name: 'lease-ttl', env: 'TRIAD_LEASE_TTL_MS' },
  identity: { name: 'identity', env: ['TRIAD_IDENTITY', 'POD_NAME'] },
  drainTimeoutMs: { name: 'drain-timeout', env: 'TRIAD_DRAIN_TIMEOUT_MS' },
  gatewayApi: { name: 'gateway-api', env: 'TRIAD_GATEWAY_API' },
  gatewayClasses: { name: 'gateway-class', env: 'TRIAD_GATEWAY_CLASSES', list: true },
  defaultGateway: { name: 'default-gateway', env: 'TRIAD_DEFAULT_GATEWAY' },
  credentialsKeyFile: { name: 'credentials-key-file', env: 'TRIAD_CREDENTIALS_KEY_FILE' },
  engineCredentialsDir: { name: 'engine-credentials-dir', env: 'TRIAD_ENGINE_CREDENTIALS_DIR' },
  shardHeartbeatMs: { name: 'shard-heartbeat', env: 'TRIAD_SHARD_HEARTBEAT_MS' },
};

/**
 * Merges flags over environment variables over a settings file (`file`, else `TRIAD_SETTINGS_FILE`) over
 * defaults and validates the result. Throws a ConfigError listing every bad setting with its flag, variable or
 * file (the CLI prints it and exits 1).
 */
export function resolveConfig(
  flags: Partial<Record<keyof WatcherConfig, unknown>>,
  env: NodeJS.ProcessEnv = process.env,
  file?: string,
): WatcherConfig {
  // Kthena's default Gateway lives in the router's own namespace: without a value, `$POD_NAMESPACE/default:8080`.
  const namespace = env['POD_NAMESPACE'];
  const schema = namespace
    ? WatcherConfigSchema.extend({ defaultGateway: DefaultGatewaySchema.prefault(`${namespace}/default:8080`) })
    : WatcherConfigSchema;
  return resolveSettings('pod-watcher', schema, CONFIG_SOURCES, { flags, env, ...(file === undefined ? {} : { file }) });
}

/** The encoder-registry period: its own setting, else the scrape interval (a dead encoder leaves within one). */
export function registryInterval(config: WatcherConfig): number {
  return config.registryIntervalMs ?? config.scrapeIntervalMs;
}
