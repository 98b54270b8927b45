import { Buckets, ScrapeFreshnessRecordSchema, objectKey } from '@triad/bus';
import { connectBus, loadCredentialsKey, type Bus } from '@triad/bus/client';
import { CredentialFiles, registerNatsMetrics, startOpsServer, waitForDependency, type Logger, type OpsServer } from '@triad/runtime';
import { registryInterval, type WatcherConfig } from './config';
import { engineAuthOf } from './engine-credentials/engine-auth';
import { EngineCredentialSync } from './engine-credentials/engine-credential-sync';
import { GatewayApiSync } from './gateway-api/gateway-api-sync';
import { Inventory } from './inventory/inventory';
import { ProviderSync } from './providers/provider-sync';
import { WatcherMetrics } from './ops/metrics';
import { ScrapeFreshnessPublisher } from './publish/scrape-freshness';
import { StatePublisher, watchScope } from './publish/state-publisher';
import { Reconciler } from './reconcile/reconciler';
import { EncoderRegistrySync } from './registry/encoder-registry-sync';
import { EngineHttp } from './scrape/engine-http';
import { Scraper } from './scrape/scraper';
import { ShardMembership } from './shard/membership';
import { ShardRing } from './shard/shard-ring';
import { FileSource } from './sources/file-source';
import type { ObjectSource } from './sources/source';

export interface PodWatcher {
  readonly opsPort: number;
  /** First full state delivered and published (or, for a standby, the lease state known). */
  readonly ready: boolean;
  readonly isLeader: boolean;
  readonly inventory: Inventory;
  readonly reconciler: Reconciler;
  readonly scraper: Scraper;
  readonly publisher: StatePublisher;
  readonly registry: EncoderRegistrySync;
  readonly source: ObjectSource;
  readonly metrics: WatcherMetrics;
  readonly providers: ProviderSync;
  /** Present in Gateway API mode. */
  readonly gatewayApi?: GatewayApiSync;
  /** Resolves when every pending KV write is acknowledged (writer only). */
  whenSettled(): Promise<void>;
  close(): Promise<void>;
}

export interface StartPodWatcherOptions {
  readonly config: WatcherConfig;
  readonly logger: Logger;
  /** Replaces the source named by `config.source` (tests). */
  readonly source?: ObjectSource;
  /** Register the process-wide default metrics (off in tests that run several watchers in one process). */
  readonly defaultMetrics?: boolean;
  /** Where TRIAD_CREDENTIALS_KEY is read from (tests pass their own). */
  readonly env?: NodeJS.ProcessEnv;
}

function createSource(config: WatcherConfig, logger: Logger, metrics: WatcherMetrics): ObjectSource {
  if (config.source.kind === 'file') return new FileSource({ path: config.source.path, logger, metrics });
  // Loaded only for the kube source: it pulls in @kubernetes/client-node.
  const { KubeSource } = require('./sources/kube/kube-source') as typeof import('./sources/kube/kube-source');
  return new KubeSource({
    namespaces: config.namespaces,
    ...(config.kubeconfig ? { kubeconfig: config.kubeconfig } : {}),
    gatewayApi: config.gatewayApi,
    logger,
    metrics,
  });
}

/**
 * Wires the pod-watcher: source → inventory (validation) → reconciler (classification, scrape targets, providers,
 * Gateway API) → publisher (KV, under the writer lease), with the scraper and the SGLang encoder-registry sync on
 * the side.
 */
export async function startPodWatcher(options: StartPodWatcherOptions): Promise<PodWatcher> {
  const { config, logger } = options;
  const credentialsKey = loadCredentialsKey(config.credentialsKeyFile, options.env);
  if (!credentialsKey) {
    logger.info(
      'no credentials key (TRIAD_CREDENTIALS_KEY, --credentials-key-file): credentials of ExternalModelProviders and ModelServer engine Secrets are not published',
    );
  }
  const metrics = new WatcherMetrics({ defaultMetrics: options.defaultMetrics ?? true });
  let publisher: StatePublisher | undefined;
  let closed = false;
  let registrySync: EncoderRegistrySync | undefined;
  let freshness: ScrapeFreshnessPublisher | undefined;
  let waiting = `waiting for NATS at ${config.nats}`;
  const ops: OpsServer = await startOpsServer({
    host: config.metricsHost,
    port: config.metricsPort,
    registry: metrics.registry,
    readiness: () =>
      publisher?.ready
        ? { ready: true }
        : {
            ready: false,
            reason: publisher ? 'first sync not published yet' : waiting,
          },
    liveness: () => !closed,
    routes: {
      '/debug/encoder-registries': () => ({
        enabled: registrySync?.enabled ?? false,
        evictedTtlMs: config.registryEvictedTtlMs,
        encodersPerPrefill: config.encodersPerPrefill,
        registries: registrySync?.snapshot() ?? [],
      }),
    },
  });
  logger.info(
    { config: { ...config, source: config.source.kind === 'file' ? `file:${config.source.path}` : 'kube' }, opsPort: ops.port },
    'pod-watcher starting',
  );

  let bus: Bus | undefined;
  registerNatsMetrics(metrics.registry, () => bus);
  const http = new EngineHttp({ timeoutMs: config.scrapeTimeoutMs });
  try {
    bus = await waitForDependency({
      what: `NATS at ${config.nats}`,
      logger,
      onWaiting: (reason) => (waiting = reason),
      attempt: () =>
        connectBus({ servers: config.nats, name: `triad-pod-watcher-${config.identity}`, logger, kvReplicas: config.kvReplicas }),
    });
    const connected = bus;
    // The reconciler needs the registry sync and the other way round: built later, found through this binding.
    let reconciler: Reconciler | undefined;
    const registry = new EncoderRegistrySync({
      http,
      intervalMs: registryInterval(config),
      evictedTtlMs: config.registryEvictedTtlMs,
      logger,
      metrics,
      onUnreachable: (_url, prefills) => reconciler?.onRegistryUnreachable(prefills),
    });
    registrySync = registry;
    // Scrape shards: every replica classifies everything, but scrapes and writes only the endpoint records the
    // live replicas' rendezvous hash gives it; membership from heartbeats on core NATS.
    const shard = new ShardRing(config.identity);
    let scraperRef: Scraper | undefined;
    const membership = new ShardMembership({
      bus,
      scope: watchScope(config.namespaces),
      identity: config.identity,
      heartbeatMs: config.shardHeartbeatMs,
      logger,
      onChange: (members) => {
        if (!shard.setMembers(members)) return;
        metrics.shardChanges.inc();
        publisher?.endpoints.reshard();
        scraperRef?.rescope();
        // Once the engines that moved here were scraped (two intervals), publish the whole shard once: it also
        // deletes records a replica that left no longer could.
        if (resync) clearTimeout(resync);
        resync = setTimeout(() => void publisher?.resyncEndpoints('scrape shards changed'), 2 * config.scrapeIntervalMs);
        resync.unref?.();
      },
    });
    let resync: NodeJS.Timeout | undefined;
    const defaultGateway = config.gatewayApi ? config.defaultGateway : undefined;
    publisher = new StatePublisher({
      bus,
      logger,
      metrics,
      namespaces: config.namespaces,
      identity: config.identity,
      leaseTtlMs: config.leaseTtlMs,
      recordHeartbeatMs: config.recordHeartbeatMs ?? Number.POSITIVE_INFINITY,
      shard,
      onLeaderChange: (leader) => {
        registry.setEnabled(leader);
        // The writer also scrapes the SGLang EPD engines its encoder-registry plan reads.
        scraperRef?.rescope();
      },
      ...(defaultGateway ? { extraOwnedKeys: [objectKey(defaultGateway.namespace, defaultGateway.name)] } : {}),
    });
    const pub = publisher;
    // The inventory and scraper report to the reconciler, which needs both: built last, found through `reconciler`.
    const scraper = new Scraper({
      intervalMs: config.scrapeIntervalMs,
      modelsIntervalMs: config.modelsIntervalMs,
      serverInfoIntervalMs: config.serverInfoIntervalMs,
      concurrency: config.scrapeConcurrency,
      http,
      logger,
      metrics,
      onUpdate: (target) => reconciler?.onScrapeUpdate(target),
      // Unchanged engines are not reported (their records are aged by the scrape freshness below), unless records
      // are to be rewritten on a heartbeat of their own for older readers.
      ...(config.recordHeartbeatMs !== undefined ? { reportEveryMs: config.recordHeartbeatMs } : {}),
      owned: (target) => reconciler?.ownsTarget(target) ?? true,
      engineAuth: (target) => reconciler?.engineAuthFor(target),
      holdUntilStart: true,
    });
    scraperRef = scraper;
    const source = options.source ?? createSource(config, logger, metrics);
    const inventory = new Inventory({
      logger,
      metrics,
      ...(source.status ? { status: source.status } : {}),
      onChange: (c) => reconciler?.onInventoryChange(c),
      onReject: (c) => reconciler?.onInventoryRejected(c),
    });
    const status = source.status ? { status: source.status } : {};
    const providers = new ProviderSync({
      inventory,
      providers: pub.externalProviders,
      credentials: pub.providerCredentials,
      ...status,
      ...(credentialsKey ? { credentialsKey } : {}),
    });
    const gatewayApi = config.gatewayApi
      ? new GatewayApiSync({
          inventory,
          gateways: pub.gateways,
          httpRoutes: pub.httpRoutes,
          ...status,
          classes: new Set(config.gatewayClasses),
          ...(defaultGateway ? { defaultGateway } : {}),
        })
      : undefined;
    const engineCredentials = new EngineCredentialSync({
      inventory,
      records: pub.engineCredentials,
      ...status,
      ...(credentialsKey ? { credentialsKey } : {}),
    });
    // The engines' API keys for the watcher's own reads: Secrets it holds, and the gateway's files when mounted here.
    const files = config.engineCredentialsDir === undefined ? undefined : new CredentialFiles(config.engineCredentialsDir);
    const authSources = {
      modelServer: (ns: string, name: string) => inventory.modelServer(ns, name),
      secret: (ns: string, name: string) => inventory.secrets.get(ns, name),
      ...(files ? { files } : {}),
    };
    reconciler = new Reconciler({
      inventory,
      scraper,
      publisher: pub,
      registry,
      providers,
      engineCredentials,
      engineAuth: (ns, name) => engineAuthOf(authSources, ns, name),
      ...(gatewayApi ? { gatewayApi } : {}),
      source: config.source.kind,
      encodersPerPrefill: config.encodersPerPrefill,
      logger,
      shard,
      isWriter: () => pub.isLeader,
      identity: config.identity,
    });
    const rec = reconciler;
    // One freshness record per replica instead of a rewrite per unchanged engine: until when all it wrote is current.
    freshness = new ScrapeFreshnessPublisher({
      open: () => connected.kv(Buckets.scrapeFreshness, ScrapeFreshnessRecordSchema),
      identity: config.identity,
      periodMs: config.metricsHeartbeatMs,
      confirmedAt: () => (pub.ready ? currentUntil(scraper.confirmedSince(), pub.endpoints.unpublishedSince()) : undefined),
      logger,
      metrics,
    });
    metrics.watch({
      objects: () => inventory.counts(),
      invalidObjects: () => inventory.invalidCounts(),
      endpoints: () => rec.table.countByRole(),
      scrapeTargets: () => scraper.size,
      staleTargets: () => scraper.staleCount(),
      isLeader: () => pub.isLeader,
      shard: () => {
        let endpoints = 0;
        for (const key of pub.endpoints.keys()) if (shard.owns(key)) endpoints += 1;
        return { targets: scraper.ownedSize, endpoints, members: shard.members.length };
      },
      encoderRegistries: () => registry.snapshot(),
      freshnessConfirmedAt: () => freshness?.confirmedAt,
    });

    membership.start();
    await pub.start();
    await source.start({ upsert: (raw) => inventory.upsert(raw), remove: (kind, ns, name) => inventory.remove(kind, ns, name) });
    rec.flushInitial();
    scraper.start();
    pub.sourceSynced();
    freshness.start();
    logger.info({ objects: inventory.counts(), endpoints: rec.table.size, leader: pub.isLeader }, 'source synced');

    return {
      opsPort: ops.port,
      get ready() {
        return pub.ready;
      },
      get isLeader() {
        return pub.isLeader;
      },
      inventory,
      reconciler: rec,
      scraper,
      publisher: pub,
      registry,
      source,
      metrics,
      providers,
      ...(gatewayApi ? { gatewayApi } : {}),
      whenSettled: () => pub.whenSettled(),
      close: async () => {
        if (closed) return;
        closed = true;
        await source.close();
        await scraper.close();
        await freshness?.stop();
        membership.stop();
        if (resync) clearTimeout(resync);
        await registry.close();
        await pub.close();
        await bus?.drain().catch(() => bus?.close());
        await http.close();
        await ops.close();
      },
    };
  } catch (err) {
    closed = true;
    await bus?.close().catch(() => undefined);
    await http.close();
    await ops.close();
    throw err;
  }
}

/**
 * Until when the records a replica wrote are current: its engines' last confirmation (none: nothing to vouch for),
 * but not past its oldest write KV has not acknowledged (what KV holds of that key is older).
 */
function currentUntil(confirmed: number | undefined, unpublishedSince: number | undefined): number | undefined {
  if (confirmed === undefined) return undefined;
  return unpublishedSince === undefined || confirmed <= unpublishedSince ? confirmed : unpublishedSince;
}
