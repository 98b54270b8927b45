import { connectBus, type Bus } from '@triad/bus/client';
import { KvIndexer } from '@triad/kv-events';
import { registerNatsMetrics, registerProcessMetrics, startOpsServer, waitForDependency, type Logger } from '@triad/runtime';
import type { KvIndexerConfig } from './config';
import { IndexerMetrics } from './metrics';

export interface KvIndexerService {
  readonly opsPort: number;
  close(): Promise<void>;
}

/**
 * Wires one kv-indexer replica: the ops port first (so probes answer 503 "waiting for NATS at ..." while NATS is
 * away), then NATS with a bounded retry, then the indexer.
 */
export async function startKvIndexerService(options: { config: KvIndexerConfig; logger: Logger }): Promise<KvIndexerService> {
  const { config, logger } = options;
  const metrics = new IndexerMetrics();
  registerProcessMetrics(metrics.registry);
  let ready = false;
  let reason = `waiting for NATS at ${config.nats}`;
  const ops = await startOpsServer({
    host: config.metricsHost,
    port: config.metricsPort,
    registry: metrics.registry,
    readiness: () => (ready ? { ready: true } : { ready: false, reason }),
    // Each followed source's last published delta: a scheduler's `/debug/kv-index` at the same epoch and seq has caught up.
    routes: { '/debug/kv-index': () => ({ sources: indexer?.publisher.positions() ?? [] }) },
  });
  let indexer: KvIndexer | undefined;
  let bus: Bus | undefined;
  registerNatsMetrics(metrics.registry, () => bus);
  const nats = await waitForDependency({
    what: `NATS at ${config.nats}`,
    logger,
    onWaiting: (why) => (reason = why),
    attempt: () =>
      connectBus({ servers: config.nats, name: `triad-kv-indexer-${config.instanceId}`, logger, kvReplicas: config.kvReplicas }),
  });
  bus = nats;
  reason = 'following the endpoints';
  const limits = {
    maxBlocks: config.maxBlocksPerSource,
    maxBlocksPerSecond: config.maxBlocksPerSecond,
    connectTimeoutMs: config.connectTimeoutMs,
  };
  const started = new KvIndexer({
    bus: nats,
    instanceId: config.instanceId,
    logger,
    metrics,
    limits,
    snapshotIntervalMs: config.snapshotIntervalMs,
  });
  indexer = started;
  metrics.watch(started);
  await started.start();
  ready = true;
  logger.info({ instanceId: config.instanceId, opsPort: ops.port, following: started.following.length }, 'kv-indexer ready');
  return {
    opsPort: ops.port,
    close: async () => {
      ready = false;
      reason = 'draining';
      await started.close();
      await nats.drain().catch(() => undefined);
      await ops.close();
    },
  };
}
