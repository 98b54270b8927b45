import { Command } from 'commander';
import { OpsSettings, UNITS_HELP, createLogger, guardProcess, onShutdown } from '@triad/runtime';
import { resolveConfig, type KvIndexerConfig } from './config';

/**
 * `triad kv-indexer --nats URL`: follows the KV-event sockets of the engine pods this replica owns (rendezvous
 * hashing over the live replicas) and publishes their blocks to NATS for every scheduler. Runs until SIGTERM.
 */
export async function main(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): Promise<void> {
  const program = new Command('triad kv-indexer')
    .description("engines' KV-cache events (ZMQ) → block deltas and snapshots on NATS for precise prefix routing")
    .option('--nats <url>', 'NATS server(s), comma-separated (TRIAD_NATS_URL, default nats://127.0.0.1:4222)')
    .option('--kv-replicas <n>', 'JetStream replicas of the KV buckets it creates, 1-5 (TRIAD_KV_REPLICAS, default 1)')
    .option('--metrics-port <port>', '/healthz /readyz /metrics port, 0 = any (TRIAD_METRICS_PORT, default 9094)')
    .option(OpsSettings.flag, OpsSettings.flagHelp)
    .option('--instance-id <id>', 'replica name (TRIAD_INSTANCE_ID, else POD_NAME, else hostname-pid)')
    .option('--snapshot-interval <duration>', 'snapshot period of changed sources (TRIAD_KV_SNAPSHOT_INTERVAL_MS, default 2s)')
    .option('--max-blocks-per-source <n>', 'blocks remembered per source (TRIAD_KV_MAX_BLOCKS_PER_SOURCE, default 1000000)')
    .option('--max-blocks-per-second <n>', 'flood limit per source (TRIAD_KV_MAX_BLOCKS_PER_SECOND, default 500000)')
    .option('--connect-timeout <duration>', 'report a socket down when not connected by then (TRIAD_KV_CONNECT_TIMEOUT_MS, default 5s)')
    .option('--drain-timeout <duration>', 'longest graceful shutdown (TRIAD_DRAIN_TIMEOUT_MS, default 10s)')
    .option('--settings <file>', 'YAML/JSON settings by flag name, under flags and env (TRIAD_SETTINGS_FILE)')
    .addHelpText('after', UNITS_HELP);
  program.parse([...argv], { from: 'user' });
  const o = program.opts<Record<string, string | undefined>>();
  const flags: Partial<Record<keyof KvIndexerConfig, unknown>> = {
    nats: o['nats'],
    kvReplicas: o['kvReplicas'],
    metricsPort: o['metricsPort'],
    metricsHost: o['metricsHost'],
    instanceId: o['instanceId'],
    snapshotIntervalMs: o['snapshotInterval'],
    maxBlocksPerSource: o['maxBlocksPerSource'],
    maxBlocksPerSecond: o['maxBlocksPerSecond'],
    connectTimeoutMs: o['connectTimeout'],
    drainTimeoutMs: o['drainTimeout'],
  };
  const config = resolveConfig(flags, env, o['settings']);
  const logger = createLogger({ service: 'kv-indexer' });
  // An unhandled rejection is logged and counted (triad_unexpected_errors_total), not the end of the process.
  guardProcess(logger);
  // Loaded here so `--help` does not pay for NATS and ZMQ.
  const { startKvIndexerService } = require('./service') as typeof import('./service');
  const service = await startKvIndexerService({ config, logger });
  onShutdown(logger, () => service.close(), { graceMs: config.drainTimeoutMs });
}
