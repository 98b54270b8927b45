import { hostname } from 'node:os';
import { Command } from 'commander';
import { createLogger, onShutdown, startOpsServer } from '@triad/runtime';

/**
 * `triad kv-indexer --nats URL`: follows the KV-event sockets of the engine pods this replica owns (rendezvous
 * hashing over the live replicas) and publishes their blocks to NATS for every scheduler. Runs until SIGTERM.
 */
export async function main(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): Promise<void> {
  const program = new Command('triad kv-indexer')
    .description('engines\' KV-cache events (ZMQ) → block deltas and snapshots on NATS for precise prefix routing')
    .option('--nats <url>', 'NATS server(s), comma-separated (TRIAD_NATS_URL)', env['TRIAD_NATS_URL'] ?? 'nats://127.0.0.1:4222')
    .option('--metrics-port <port>', '/healthz /readyz /metrics port, 0 = any (TRIAD_METRICS_PORT)', env['TRIAD_METRICS_PORT'] ?? '9093')
    .option('--instance-id <id>', 'replica name (TRIAD_INSTANCE_ID, POD_NAME)', env['TRIAD_INSTANCE_ID'] ?? env['POD_NAME'] ?? `${hostname()}-${process.pid}`)
    .option('--snapshot-interval <ms>', 'snapshot period of changed sources (TRIAD_KV_SNAPSHOT_INTERVAL_MS)', env['TRIAD_KV_SNAPSHOT_INTERVAL_MS'] ?? '2000')
    .option('--max-blocks-per-source <n>', 'blocks remembered per source (TRIAD_KV_MAX_BLOCKS_PER_SOURCE)', env['TRIAD_KV_MAX_BLOCKS_PER_SOURCE'] ?? '1000000')
    .option('--max-blocks-per-second <n>', 'flood limit per source (TRIAD_KV_MAX_BLOCKS_PER_SECOND)', env['TRIAD_KV_MAX_BLOCKS_PER_SECOND'] ?? '500000')
    .option('--connect-timeout <ms>', 'report a socket down when not connected by then (TRIAD_KV_CONNECT_TIMEOUT_MS)', env['TRIAD_KV_CONNECT_TIMEOUT_MS'] ?? '5000');
  program.parse([...argv], { from: 'user' });
  const o = program.opts<Record<string, string>>();
  const num = (name: string, min: number): number => {
    const v = Number(o[name]);
    if (!Number.isInteger(v) || v < min) throw new Error(`--${name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}: expected an integer >= ${min}, got ${o[name]}`);
    return v;
  };
  const metricsPort = num('metricsPort', 0);
  const limits = { maxBlocks: num('maxBlocksPerSource', 1), maxBlocksPerSecond: num('maxBlocksPerSecond', 1), connectTimeoutMs: num('connectTimeout', 1) };
  const snapshotIntervalMs = num('snapshotInterval', 10);
  const logger = createLogger({ service: 'kv-indexer' });
  // Loaded here so `--help` does not pay for NATS and ZMQ.
  const { connectBus } = require('@triad/bus/client') as typeof import('@triad/bus/client');
  const { KvIndexer } = require('@triad/kv-events') as typeof import('@triad/kv-events');
  const { IndexerMetrics } = require('./metrics') as typeof import('./metrics');
  const metrics = new IndexerMetrics();
  let ready = false;
  const ops = await startOpsServer({ port: metricsPort, registry: metrics.registry, readiness: () => (ready ? { ready: true } : { ready: false, reason: 'connecting to NATS' }) });
  const bus = await connectBus({ servers: o['nats'] as string, name: `triad-kv-indexer-${o['instanceId']}`, logger, waitOnFirstConnect: true });
  const indexer = new KvIndexer({ bus, instanceId: o['instanceId'] as string, logger, metrics, limits, snapshotIntervalMs });
  metrics.watch(indexer);
  await indexer.start();
  ready = true;
  logger.info({ instanceId: o['instanceId'], opsPort: ops.port, following: indexer.following.length }, 'kv-indexer ready');
  onShutdown(logger, async () => {
    ready = false;
    await indexer.close();
    await bus.drain().catch(() => undefined);
    await ops.close();
  }, { graceMs: 10_000 });
}
