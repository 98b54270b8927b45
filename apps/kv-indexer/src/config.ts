import { hostname } from 'node:os';
import { z } from 'zod';
import { NatsSettings, OpsSettings, Setting, resolveSettings, type SettingSources } from '@triad/runtime';

/** KV-indexer settings: flags over `TRIAD_*` environment variables over a settings file over defaults. */
const KvIndexerConfigSchema = z.object({
  nats: NatsSettings.servers().default(NatsSettings.defaultUrl),
  /** JetStream replicas of the KV buckets this service creates (3 on a 3-node NATS cluster). */
  kvReplicas: NatsSettings.kvReplicas().default(1),
  /** Port of /healthz, /readyz and /metrics; 0 picks a free one. */
  metricsPort: Setting.port().default(9094),
  metricsHost: OpsSettings.host(),
  /** This replica's name in the membership bucket and on its NATS connection. */
  instanceId: z
    .string()
    .min(1)
    .default(() => `${hostname()}-${process.pid}`),
  /** Snapshot period of the sources that changed. */
  snapshotIntervalMs: Setting.ms(10).default(2000),
  /** Blocks remembered per source (least recently stored dropped, published as removed). */
  maxBlocksPerSource: Setting.count(1).default(1_000_000),
  /** Flood limit per source: above it the source is cleared and ignored for a while. */
  maxBlocksPerSecond: Setting.count(1).default(500_000),
  /** A socket not connected by then is reported down. */
  connectTimeoutMs: Setting.ms(1).default(5000),
  /** Longest a SIGTERM shutdown may take. */
  drainTimeoutMs: Setting.ms(0).default(10_000),
});
export type KvIndexerConfig = z.infer<typeof KvIndexerConfigSchema>;

/** The flag / settings-file name and environment variable of each setting. */
export const CONFIG_SOURCES: SettingSources<KvIndexerConfig> = {
  nats: NatsSettings.sources.nats,
  kvReplicas: NatsSettings.sources.kvReplicas,
  metricsPort: { name: 'metrics-port', env: 'TRIAD_METRICS_PORT' },
  metricsHost: OpsSettings.sources.metricsHost,
  instanceId: { name: 'instance-id', env: ['TRIAD_INSTANCE_ID', 'POD_NAME'] },
  snapshotIntervalMs: { name: 'snapshot-interval', env: 'TRIAD_KV_SNAPSHOT_INTERVAL_MS' },
  maxBlocksPerSource: { name: 'max-blocks-per-source', env: 'TRIAD_KV_MAX_BLOCKS_PER_SOURCE' },
  maxBlocksPerSecond: { name: 'max-blocks-per-second', env: 'TRIAD_KV_MAX_BLOCKS_PER_SECOND' },
  connectTimeoutMs: { name: 'connect-timeout', env: 'TRIAD_KV_CONNECT_TIMEOUT_MS' },
  drainTimeoutMs: { name: 'drain-timeout', env: 'TRIAD_DRAIN_TIMEOUT_MS' },
};

/**
 * Merges flags over environment variables over a settings file (`file`, else `TRIAD_SETTINGS_FILE`) over
 * defaults and validates the result. Throws a ConfigError listing every bad setting with its flag, variable or
 * file (the CLI prints it and exits 1).
 */
export function resolveConfig(
  flags: Partial<Record<keyof KvIndexerConfig, unknown>>,
  env: NodeJS.ProcessEnv = process.env,
  file?: string,
): KvIndexerConfig {
  return resolveSettings('kv-indexer', KvIndexerConfigSchema, CONFIG_SOURCES, { flags, env, ...(file === undefined ? {} : { file }) });
}
