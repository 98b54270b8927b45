import { hostname } from 'node:os';
import type { AddressInfo } from 'node:net';
import { connectBus, loadCredentialsKey, startOutlierFeed, type Bus } from '@triad/bus/client';
import type { EndpointRecord } from '@triad/bus';
import { ConnectorRegistry, UpstreamPools } from '@triad/connectors';
import { composeHooks, type RequestHooks } from '@triad/request';
import { OutlierTable } from '@triad/scheduling';
import {
  createLogger,
  registerNatsMetrics,
  registerUnexpectedErrorMetrics,
  startOpsServer,
  waitForDependency,
  type Logger,
} from '@triad/runtime';
import { requestLimitsOf, type GatewayConfig } from './config';
import { DispatchPublisher } from './dispatch/dispatch-publisher';
import { GatewayObserver } from './http/gateway-observer';
import { InferenceHandler } from './http/inference-handler';
import { EngineCredentials } from './planning/engine-credentials';
import { EngineSecrets } from './planning/engine-secrets';
import { EnginePlanner } from './planning/engine-planner';
import { buildHttpServer } from './http/server';
import { ClientConnectionCap } from './http/client-connection-cap';
import { tooManyConnectionsResponse } from './http/http-layer';
import { GatewayMetrics } from './observability/metrics';
import { registerKeyAgreementMetrics, registerKvKeyMetrics } from './observability/kv-key-metrics';
import { OutlierDetector, countEjected } from './outliers/outlier-detector';
import { OutlierProber } from './outliers/outlier-prober';
import { createIntegrations } from './integrations';
import { TurnFlusher } from './nats/turn-flusher';
import { DpRankBalancer } from './scheduling/dp-rank-balancer';
import { LocalSchedulingFallback } from './scheduling/local-scheduling';
import { SchedulerClient } from './scheduling/scheduler-client';
import { KvView } from './state/kv-view';
import { ProviderDirectory } from './providers/provider-directory';
import { ProviderConnector } from './providers/provider-connector';
import { TargetLocator } from './routing/target-locator';
import { GatewayApiView } from './gateway-api/gateway-api-view';
import { ListenerServers } from './gateway-api/listener-servers';

export interface GatewayOptions {
  readonly config: GatewayConfig;
  readonly logger?: Logger;
  /** More lifecycle hooks, called after the built-in integrations (tracing, admission). */
  readonly hooks?: readonly RequestHooks[];
  /** Telemetry is set up (`setupTelemetry`) and exporting: install the tracing hooks. */
  readonly tracing?: boolean;
}

export interface GatewayHandle {
  readonly url: string;
  readonly port: number;
  readonly metricsPort: number;
  readonly metrics: GatewayMetrics;
  /**
   * The endpoint record this gateway's KV view holds under `key`, if any. The view follows the buckets
   * asynchronously, so an embedder (or a test) that just wrote records waits on this before sending traffic.
   */
  endpointRecord(key: string): EndpointRecord | undefined;
  /** Graceful stop: readiness off, no new connections, running requests finish within the drain budget. */
  close(): Promise<void>;
}

/** Wires and starts the gateway: NATS, KV view, scheduling, connectors, HTTP and ops servers. */
export async function startGateway(options: GatewayOptions): Promise<GatewayHandle> {
  const config = options.config;
  const logger = options.logger ?? createLogger({ service: 'gateway' });
  const id = config.instanceId ?? `${hostname()}-${process.pid}`;
  const metrics = new GatewayMetrics();
  registerUnexpectedErrorMetrics(metrics.registry);
  // The ops port answers before NATS is reached (/healthz 200, /readyz 503 with the reason), so a gateway started
  // ahead of NATS says why it is not ready instead of refusing its probes.
  let readiness = (): { ready: boolean; reason?: string } => ({ ready: false, reason: `waiting for NATS at ${config.nats}` });
  const ops = await startOpsServer({
    host: config.metricsHost,
    port: config.metricsPort,
    registry: metrics.registry,
    readiness: () => readiness(),
  });
  logger.info({ metricsPort: ops.port, nats: config.nats, id }, 'gateway starting');
  let connection: Bus | undefined;
  registerNatsMetrics(metrics.registry, () => connection);
  const bus = await waitForDependency({
    what: `NATS at ${config.nats}`,
    logger,
    onWaiting: (reason) => (readiness = () => ({ ready: false, reason })),
    // noEcho: it skips its own affinity records and (in-process scheduling) its own dispatch batches anyway.
    attempt: () => connectBus({ servers: config.nats, name: `triad-gateway-${id}`, logger, kvReplicas: config.kvReplicas, noEcho: true }),
  });
  connection = bus;
  const pools = new UpstreamPools({ connections: config.upstreamConnections });
  const timeouts = {
    encodeMs: config.encodeTimeoutMs,
    prefillMs: config.prefillTimeoutMs,
    firstByteMs: config.firstByteTimeoutMs,
    totalMs: config.totalTimeoutMs,
  };
  const kv = new KvView(timeouts, (ip, port) => pools.release(ip, port));
  // Outlier state: fed from the shared bucket, read by the in-process scheduler, written through this gateway's detector.
  const outliers = new OutlierTable();
  const fallback = new LocalSchedulingFallback(kv, id, logger, { outliers, kvKeys: registerKvKeyMetrics(metrics.registry) });
  registerKeyAgreementMetrics(metrics.registry, fallback.local.keyAgreement);
  const dpRanks = new DpRankBalancer((key) => kv.endpoint(key));
  kv.addListener(dpRanks);
  if (config.schedulerConfig !== undefined) fallback.useConfigFile(config.schedulerConfig);
  const integrations = await createIntegrations({
    config,
    kv,
    bus,
    registry: metrics.registry,
    logger,
    replicaId: id,
    tracing: options.tracing === true,
  });
  // One end-of-turn callback sends the scheduling batch first, then the dispatch events: one NATS write per turn.
  const turn = new TurnFlusher();
  if (config.scheduling === 'in-process') fallback.followPeers(bus);
  const scheduler = new SchedulerClient(
    bus.nc,
    fallback,
    {
      inProcess: config.scheduling === 'in-process',
      budgetMs: config.scheduleBudgetMs,
      backoffMs: config.schedulerBackoffMs,
      maxBatch: config.scheduleMaxBatch,
      maxInFlight: config.scheduleMaxInFlight,
      onLocal: (reason, n) => metrics.local(reason, n),
      onBatch: (size, seconds) => metrics.batch(size, seconds),
      ...(integrations.batchHeaders ? { batchHeaders: integrations.batchHeaders } : {}),
    },
    turn,
  );
  const dispatch = new DispatchPublisher(
    bus.nc,
    id,
    { snapshotIntervalMs: config.snapshotIntervalMs, flushWindowMs: config.dispatchFlushMs, wire: config.dispatchWire },
    turn,
    (e) => fallback.dispatched(e),
  );
  const hooks = composeHooks([...integrations.hooks, ...(options.hooks ?? [])]);
  const observer = new GatewayObserver(dispatch, metrics, hooks, logger);
  const credentialsKey = loadCredentialsKey(config.credentialsKeyFile);
  const directory = new ProviderDirectory(credentialsKey);
  const engineSecrets = new EngineSecrets(credentialsKey);
  // Gateway API mode: listeners from the pod-watcher's Gateway records, one server per port (ListenerServers).
  let listenerServers: ListenerServers | undefined;
  const gatewayApi = config.gatewayApi ? new GatewayApiView((ports) => void listenerServers?.sync(ports)) : undefined;
  const locator = new TargetLocator({
    kv,
    providers: directory,
    providerSettings: {
      retries: config.providerRetries,
      retryIntervalMs: config.providerRetryIntervalMs,
      firstByteTimeoutMs: config.firstByteTimeoutMs,
      totalTimeoutMs: config.totalTimeoutMs,
    },
    gatewayApi,
  });
  const planner = new EnginePlanner({
    scheduler,
    metrics,
    hooks,
    engineCredentials: new EngineCredentials(config.engineCredentialsDir),
    engineSecrets,
    hashOptions: () => fallback.hashOptions,
    kvBlockKeys: (request) => fallback.kvHashing.keys(request),
    dpRank: dpRanks.pick,
  });
  const connectors = new ConnectorRegistry({
    'external-openai': () => new ProviderConnector('external-openai'),
    'external-anthropic': () => new ProviderConnector('external-anthropic'),
  });
  const handler = new InferenceHandler({
    kv,
    locator,
    planner,
    connectors,
    pools,
    metrics,
    hooks,
    observer,
    logger,
    accessLog: config.accessLog,
    kvRelease: config.kvRelease,
    limits: requestLimitsOf(config),
  });
  let draining = false;
  // Ready only once the data port listens: the ops port comes up first, and a probe must not see "ready" while
  // connections to the API port would still be refused.
  let listening = false;
  const ready = () => listening && kv.synced && !draining && !bus.nc.isClosed();
  readiness = () =>
    ready() ? { ready: true } : { ready: false, reason: draining ? 'draining' : kv.synced ? 'starting the API listener' : 'syncing KV' };
  await Promise.all([kv.start(bus), directory.start(bus), engineSecrets.start(bus)]);
  await fallback.followConfig(bus);
  // Outlier ejection: this gateway's legs feed the detector, the shared bucket feeds the in-process scheduler.
  const outlierFeed = await startOutlierFeed(bus, (change) => outliers.apply(change));
  await outlierFeed.synced;
  const detector = new OutlierDetector(
    outliers,
    outlierFeed.kv,
    id,
    {
      ejected: (server, stage, reason) => metrics.outlierEjected(server, stage, reason),
      restored: (server, stage) => metrics.outlierRestored(server, stage),
    },
    logger,
  );
  observer.outliers = detector;
  // Ejected endpoints of ModelServers that ask for it get a cheap GET now and then; a 2xx ends the ejection early.
  const prober = new OutlierProber(
    outliers,
    { endpoint: (key) => kv.endpoint(key), policy: (namespace, name) => kv.server(namespace, name)?.profile.outlier },
    detector,
    logger,
  );
  prober.start();
  metrics.watchOutliers(() => countEjected(outliers, Date.now()));
  // The fallback's affinity records leave with the dispatch events: one window, one write (in-process scheduling
  // learns records on every decision).
  fallback.followAffinity(bus, (send) => dispatch.alongside(send));
  // One cap for every server (the API port and the Gateway API listener ports): a client is its address.
  const connectionCap = new ClientConnectionCap({
    maxPerClient: config.maxConnectionsPerClient,
    answer: tooManyConnectionsResponse(config.maxConnectionsPerClient),
    lingerMs: config.headersTimeoutMs,
    onRefused: (address, first) => {
      metrics.connectionRefused('per_client_cap');
      if (first) logger.warn({ address, max: config.maxConnectionsPerClient }, 'client address at its connection cap: refusing more');
    },
  });
  const serverOptions = {
    bodyLimit: config.bodyLimit,
    bodyDiscardLimit: config.bodyDiscardLimit,
    keepAliveTimeoutMs: config.keepAliveTimeoutMs,
    headersTimeoutMs: config.headersTimeoutMs,
    requestTimeoutMs: config.requestReceiveTimeoutMs,
    connectionCap,
    handler,
    routes: kv.routes,
    ready,
    draining: () => draining,
    gatewayApi,
  };
  const app = buildHttpServer(serverOptions);
  listenerServers = gatewayApi === undefined ? undefined : new ListenerServers(() => buildHttpServer(serverOptions), config.host, logger);
  if (gatewayApi !== undefined) await gatewayApi.start(bus);
  await app.listen({ port: config.port, host: config.host });
  await listenerServers?.start((app.server.address() as AddressInfo).port);
  await listenerServers?.sync(gatewayApi?.ports ?? new Set());
  listening = true;
  dispatch.start();
  const port = (app.server.address() as AddressInfo).port;
  logger.info({ port, metricsPort: ops.port, nats: config.nats, id }, 'gateway listening');

  let closing: Promise<void> | undefined;
  const close = async (): Promise<void> => {
    draining = true;
    const deadline = setTimeout(() => app.server.closeAllConnections(), config.drainTimeoutMs);
    deadline.unref();
    await Promise.all([app.close(), listenerServers?.close()]);
    clearTimeout(deadline);
    dispatch.stop();
    kv.stop();
    prober.stop();
    outlierFeed.stop();
    directory.stop();
    engineSecrets.stop();
    gatewayApi?.stop();
    fallback.stop();
    // Before the bus drains: a batch still waiting for its reply is decided locally now, its budget timer cleared.
    scheduler.close();
    await integrations.close();
    await pools.close(true);
    await bus.drain().catch(() => undefined);
    await ops.close();
  };
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    metricsPort: ops.port,
    metrics,
    endpointRecord: (key) => kv.endpoint(key),
    close: () => (closing ??= close()),
  };
}
