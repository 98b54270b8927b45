import { hostname } from 'node:os';
import { z } from 'zod';

const Port = z.coerce.number().int().min(0).max(65535);
const Ms = (min: number) => z.coerce.number().int().min(min);

/** `kube`, or `file:PATH` (multi-document YAML of ModelServers, ModelRoutes and Pods). */
export type SourceSpec = { readonly kind: 'kube' } | { readonly kind: 'file'; readonly path: string };

const SourceSchema = z.string().transform((text, ctx): SourceSpec => {
  if (text === 'kube') return { kind: 'kube' };
  if (text.startsWith('file:') && text.length > 'file:'.length) return { kind: 'file', path: text.slice('file:'.length) };
  ctx.addIssue({ code: 'custom', message: `must be 'kube' or 'file:PATH', got '${text}'` });
  return z.NEVER;
});

const Bool = z.union([z.boolean(), z.enum(['true', 'false', '1', '0'])]).transform((v) => v === true || v === 'true' || v === '1');

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
  return { namespace: m[1] as string, name: m[3] as string, port };
});

/** Pod-watcher settings: flags, with `TRIAD_*` environment variables as defaults. */
export const WatcherConfigSchema = z.object({
  nats: z.string().min(1).default('nats://127.0.0.1:4222'),
  source: SourceSchema.default({ kind: 'kube' }),
  /** Namespaces to watch (kube source); empty means all namespaces. */
  namespaces: z.array(z.string().min(1)).default([]),
  /** Kubeconfig file; without it, KUBECONFIG, ~/.kube/config or the in-cluster service account. */
  kubeconfig: z.string().optional(),
  metricsPort: Port.default(9092),
  /** How often each endpoint's /metrics is scraped. */
  scrapeIntervalMs: Ms(50).default(1000),
  /** Per-request timeout of a scrape (metrics or models). */
  scrapeTimeoutMs: Ms(10).default(2000),
  /** Scrapes in flight at once, across all endpoints. */
  scrapeConcurrency: z.coerce.number().int().min(1).max(1024).default(64),
  /** How often GET /v1/models is refreshed per endpoint (new endpoints are asked at once). */
  modelsIntervalMs: Ms(50).default(5000),
  /**
   * An endpoint record whose metric values did not change is rewritten at most this often, just to refresh
   * `scrapedAt` (keep it below the scheduler's stale-metrics bound, 10 s by default).
   */
  metricsHeartbeatMs: Ms(0).default(5000),
  /** Period of the SGLang EPD encoder-registry reconcile (changes are applied at once as well). */
  registryIntervalMs: Ms(50).optional(),
  /** Writer lease in NATS KV: a replica that has not renewed it for this long is replaced by another. */
  leaseTtlMs: Ms(300).default(5000),
  /** This replica's name in the lease (defaults to POD_NAME, else hostname-pid). */
  identity: z.string().min(1).default(() => process.env['POD_NAME'] ?? `${hostname()}-${process.pid}`),
  /** Longest time a SIGTERM shutdown may take. */
  drainTimeoutMs: Ms(0).default(10_000),
  /** Kthena's `--enable-gateway-api`: watch Gateways, HTTPRoutes, InferencePools (and Namespaces) too. */
  gatewayApi: Bool.default(false),
  /** GatewayClass names whose Gateways are Triad's (Kthena's is `kthena-router`). */
  gatewayClasses: z.array(z.string().min(1)).default(['kthena-router', 'triad']),
  /**
   * The default Gateway (Kthena's router creates one, `default` in its namespace, listening on its port): a
   * record Triad publishes, not an object it creates. `none` to have only real Gateways.
   */
  defaultGateway: DefaultGatewaySchema.default({ namespace: 'default', name: 'default', port: 8080 }),
  /** File holding the key provider credentials are sealed with for the gateway (a mounted Secret). */
  credentialsKeyFile: z.string().optional(),
});
export type WatcherConfig = z.infer<typeof WatcherConfigSchema>;
export type WatcherConfigInput = z.input<typeof WatcherConfigSchema>;

/** Environment variable of each setting (the flags are the kebab-case keys; `namespaces` is `--namespace`). */
export const CONFIG_ENV: Readonly<Record<keyof WatcherConfig, string>> = {
  nats: 'TRIAD_NATS_URL',
  source: 'TRIAD_SOURCE',
  namespaces: 'TRIAD_NAMESPACES',
  kubeconfig: 'KUBECONFIG',
  metricsPort: 'TRIAD_METRICS_PORT',
  scrapeIntervalMs: 'TRIAD_SCRAPE_INTERVAL_MS',
  scrapeTimeoutMs: 'TRIAD_SCRAPE_TIMEOUT_MS',
  scrapeConcurrency: 'TRIAD_SCRAPE_CONCURRENCY',
  modelsIntervalMs: 'TRIAD_MODELS_INTERVAL_MS',
  metricsHeartbeatMs: 'TRIAD_METRICS_HEARTBEAT_MS',
  registryIntervalMs: 'TRIAD_REGISTRY_INTERVAL_MS',
  leaseTtlMs: 'TRIAD_LEASE_TTL_MS',
  identity: 'TRIAD_IDENTITY',
  drainTimeoutMs: 'TRIAD_DRAIN_TIMEOUT_MS',
  gatewayApi: 'TRIAD_GATEWAY_API',
  gatewayClasses: 'TRIAD_GATEWAY_CLASSES',
  defaultGateway: 'TRIAD_DEFAULT_GATEWAY',
  credentialsKeyFile: 'TRIAD_CREDENTIALS_KEY_FILE',
};

/** Environment variable holding the credentials key inline (base64 or hex), when no key file is given. */
export const CREDENTIALS_KEY_ENV = 'TRIAD_CREDENTIALS_KEY';

/**
 * Merges flags over environment variables over defaults and validates the result. Throws an Error listing every
 * bad setting (the CLI prints it and exits 1).
 */
export function resolveConfig(flags: Partial<Record<keyof WatcherConfig, unknown>>, env: NodeJS.ProcessEnv = process.env): WatcherConfig {
  const merged: Record<string, unknown> = {};
  for (const [key, envName] of Object.entries(CONFIG_ENV) as [keyof WatcherConfig, string][]) {
    const flag = flags[key];
    const fromEnv = key === 'kubeconfig' ? undefined : env[envName];
    if (flag !== undefined && !(Array.isArray(flag) && flag.length === 0)) merged[key] = flag;
    else if (fromEnv !== undefined && fromEnv !== '') {
      merged[key] = key === 'namespaces' || key === 'gatewayClasses' ? fromEnv.split(',').map((s) => s.trim()).filter(Boolean) : fromEnv;
    }
  }
  // Kthena's default Gateway lives in the router's own namespace.
  if (merged['defaultGateway'] === undefined && env['POD_NAMESPACE']) merged['defaultGateway'] = `${env['POD_NAMESPACE']}/default:8080`;
  const parsed = WatcherConfigSchema.safeParse(merged);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.') || 'config'}: ${i.message}`);
    throw new Error(`invalid pod-watcher settings: ${problems.join('; ')}`);
  }
  return parsed.data;
}

/** The encoder-registry period: its own setting, else the scrape interval (a dead encoder leaves within one). */
export function registryInterval(config: WatcherConfig): number {
  return config.registryIntervalMs ?? config.scrapeIntervalMs;
}
