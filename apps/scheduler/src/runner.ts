import { ErrorCode } from '@triad/errors';
import { SCHEDULER_QUEUE_GROUP, ScheduleBatchReplySchema, Subjects, scheduleReplyJson } from '@triad/bus';
import { readFileSync } from 'node:fs';
import { connectBus, startAffinityFeed, startDispatchFeed, startOutlierFeed, watchSchedulerConfig, type Bus } from '@triad/bus/client';
import {
  createLogger,
  registerNatsMetrics,
  registerProcessMetrics,
  startOpsServer,
  waitForDependency,
  watchFile,
  type Logger,
  type OpsServer,
} from '@triad/runtime';
import { startKvIndexFeed, type KvIndexFeed } from '@triad/kv-events';
import {
  SchedulerReplica,
  type ActiveConfig,
  type EndpointIndex,
  type InflightTracker,
  type KvBlockIndex,
  type PluginRegistry,
  type Scheduler,
} from '@triad/scheduling';
import { tracingEnabled } from '@triad/telemetry';
import { SchedulerMetrics } from './metrics';
import { DEFAULT_AFFINITY_FLUSH_MS, type SchedulerServiceOptions } from './options';
import { DecideObserver } from './service/decide-tracing';
import { LenientScheduleBatchSchema, batchError, handleScheduleBatch, readScheduleBatch } from './service/schedule-handler';
import { startKvFeed } from './state/kv-feed';

/** A running scheduler replica. */
export interface SchedulerService {
  readonly instanceId: string;
  /** Port of /healthz, /readyz, /metrics. */
  readonly opsPort: number;
  readonly index: EndpointIndex;
  readonly tracker: InflightTracker;
  readonly scheduler: Scheduler;
  readonly metrics: SchedulerMetrics;
  activeConfig(): ActiveConfig;
  /** Stops answering (in-flight batches finish), stops the watches, closes NATS and the ops server. */
  close(): Promise<void>;
}

export interface StartOptions extends SchedulerServiceOptions {
  readonly logger?: Logger;
  /** Plugin types; defaults to the in-tree ones (out-of-tree plugins register here). */
  readonly registry?: PluginRegistry;
  /** Engines' KV blocks for precise-prefix-cache, fed from the KV indexers; pass the one a custom registry uses. */
  readonly kvIndex?: KvBlockIndex;
  /** Export the process and Node.js metrics (default true; tests that start many replicas in one process turn it off). */
  readonly processMetrics?: boolean;
}

/**
 * Wires one scheduler replica (libs/scheduling's SchedulerReplica) to NATS: config (file + KV, hot reload); KV
 * watches → index; dispatch events → in-flight counts; outlier ejections the gateways write (every replica leaves
 * the same endpoints out); and, once the index has synced, the `triad.v1.schedule` responder in queue group
 * `schedulers` (joining the group only when ready, so no request lands on a replica with an empty view).
 */
export async function startScheduler(options: StartOptions): Promise<SchedulerService> {
  const logger = options.logger ?? createLogger({ service: 'scheduler' });
  const metrics = new SchedulerMetrics();
  if (options.processMetrics !== false) registerProcessMetrics(metrics.registry);
  // Plugin timings feed the metrics; a traced request's phases become spans under its decide span.
  const observer = new DecideObserver(metrics, options.pickQualityEvery);
  const replica = new SchedulerReplica({
    instanceId: options.instanceId,
    registry: options.registry,
    kvIndex: options.kvIndex,
    observer,
    log: logger,
    onReload: (source, result) => metrics.configReloads.inc({ source, result }),
  });
  const { index, tracker, scheduler, kvIndex, outliers, config } = replica;
  metrics.watchKeyAgreement(replica.keyAgreement);
  if (options.configFile) config.initialFile(readFileSync(options.configFile, 'utf8'), options.configFile);

  let ready = false;
  let reason = `waiting for NATS at ${options.natsUrl}`;
  let bus: Bus | undefined;
  metrics.watch(index, tracker, () => (bus ? [...bus.rejected.values()].reduce((a, b) => a + b, 0) : 0));
  registerNatsMetrics(metrics.registry, () => bus);
  // Probes answer from the start: 503 "waiting for NATS at ..." rather than a refused connection while NATS is away.
  const ops = await startOpsServer({
    ...(options.metricsHost === undefined ? {} : { host: options.metricsHost }),
    port: options.metricsPort,
    registry: metrics.registry,
    readiness: () => ({ ready, reason }),
    liveness: () => bus === undefined || !bus.nc.isClosed(),
    // Compared with the kv-indexer's own route, shows whether this replica's prefix index has caught up per source.
    routes: {
      '/debug/kv-index': () => ({ sources: kvFeed?.positions() ?? [] }),
      // Per profile: which scorer decided the picks and how often the load bound overruled affinity.
      '/debug/pick-quality': () => metrics.picks.view(),
    },
  });
  let kvFeed: KvIndexFeed | undefined;
  const closers: (() => void | Promise<void>)[] = [];
  try {
    bus = await waitForDependency({
      what: `NATS at ${options.natsUrl}`,
      logger,
      onWaiting: (why) => (reason = why),
      attempt: () =>
        connectBus({
          servers: options.natsUrl,
          name: `triad-scheduler-${options.instanceId}`,
          logger,
          kvReplicas: options.kvReplicas ?? 1,
          // It skips its own affinity records anyway: no echo, no delivery, read and schema check per message.
          noEcho: true,
        }),
    });
    const nats = bus;
    reason = 'loading config and syncing the index';
    const kvConfig = await watchSchedulerConfig(nats, (text) => config.kvChanged(text));
    closers.push(() => kvConfig.stop());
    if (kvConfig.initial !== undefined) config.kvChanged(kvConfig.initial);
    if (options.configFile) {
      const file = watchFile(
        options.configFile,
        (text) => config.fileChanged(text),
        (err) => logger.warn({ err }, 'config file watch failed'),
      );
      closers.push(() => file.close());
    }
    const dispatch = startDispatchFeed(nats, tracker);
    closers.push(() => dispatch.stop());
    // Affinity learned by any replica (or a gateway's fallback) reaches every replica: same tables everywhere.
    // Coalesced over a window (one message per window, not per batch: each wakes nats-server and every
    // subscriber), sent with the reply of the first batch after the window's end (its socket write); with no
    // window, every batch's records go with its reply.
    const windowMs = options.affinityFlushMs ?? DEFAULT_AFFINITY_FLUSH_MS;
    const affinity = startAffinityFeed(nats, scheduler, { origin: options.instanceId, flush: windowMs > 0 ? { windowMs } : 'microtask' });
    scheduler.onLearned = (record) => affinity.publish(record);
    closers.push(() => {
      scheduler.onLearned = undefined;
      affinity.stop();
    });
    const feedOfBlocks = await startKvIndexFeed(nats, kvIndex, { onLag: (ms) => metrics.kvIndexLag(ms) });
    kvFeed = feedOfBlocks;
    closers.push(() => feedOfBlocks.stop());
    const feed = await startKvFeed(nats, index);
    closers.push(() => feed.stop());
    const outlierFeed = await startOutlierFeed(nats, (change) => outliers.apply(change));
    closers.push(() => outlierFeed.stop());
    await feed.synced;
    await outlierFeed.synced;
    await feedOfBlocks.synced;
    const sub = nats.serve(
      Subjects.schedule,
      LenientScheduleBatchSchema,
      ScheduleBatchReplySchema,
      (batch, ctx) =>
        handleScheduleBatch(
          batch,
          { scheduler, index, metrics, observer, tracePhases: options.tracePhases === true },
          // Trace contexts come from the headers only when this process traces (read lazily: untouched otherwise).
          tracingEnabled() ? ctx.headers : undefined,
          ctx,
        ),
      {
        queue: SCHEDULER_QUEUE_GROUP,
        onInvalid: (error) => batchError(ErrorCode.SchedBadRequest, `invalid schedule batch: ${error}`),
        onError: (err) => batchError(ErrorCode.Internal, (err as Error).message),
        read: readScheduleBatch,
        // The same bytes as JSON.stringify, with each endpoint ref's JSON written once and reused.
        write: scheduleReplyJson,
      },
    );
    // Stop taking requests first on close; drain lets the batches already received be answered.
    closers.unshift(() => sub.drain());
    // A round-trip to the server: once it returns, the server has our subscription, so "ready" means reachable.
    await nats.nc.flush();
    ready = true;
    reason = '';
    logger.info({ origin: config.active.origin, config: scheduler.config.config }, 'scheduler config in effect (defaults filled in)');
    logger.info(
      { instanceId: options.instanceId, endpoints: index.size, modelServers: index.modelServerCount, opsPort: ops.port },
      'scheduler ready',
    );
  } catch (err) {
    await closeAll(closers, ops, bus, logger);
    throw err;
  }

  const opsServer = ops;
  const nats = bus;
  let closed: Promise<void> | undefined;
  return {
    instanceId: options.instanceId,
    opsPort: opsServer.port,
    index,
    tracker,
    scheduler,
    metrics,
    activeConfig: () => config.active,
    close: () => {
      ready = false;
      reason = 'shutting down';
      closed ??= closeAll(closers, opsServer, nats, logger).then(() => replica.close());
      return closed;
    },
  };
}

async function closeAll(
  closers: readonly (() => void | Promise<void>)[],
  ops: OpsServer,
  bus: Bus | undefined,
  logger: Logger,
): Promise<void> {
  for (const close of closers) {
    try {
      await close();
    } catch (err) {
      logger.warn({ err }, 'error while closing');
    }
  }
  await bus?.drain().catch((err: unknown) => logger.warn({ err }, 'NATS drain failed'));
  await ops.close();
}
