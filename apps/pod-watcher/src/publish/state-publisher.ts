import {
  Buckets,
  EndpointRecordSchema,
  EngineCredentialRecordSchema,
  ExternalProviderRecordSchema,
  GatewayRecordSchema,
  HttpRouteRecordSchema,
  ModelRouteRecordSchema,
  ModelServerRecordSchema,
  ProviderCredentialRecordSchema,
  parseEndpointKey,
  parseObjectKey,
  type EndpointRecord,
  type EngineCredentialRecord,
  type ExternalProviderRecord,
  type GatewayRecord,
  type HttpRouteRecord,
  type ModelRouteRecord,
  type ModelServerRecord,
  type ProviderCredentialRecord,
} from '@triad/bus';
import type { z } from 'zod';
import type { Bus } from '@triad/bus/client';
import { backoffDelay, type Logger } from '@triad/runtime';
import type { WatcherMetrics } from '../ops/metrics';
import type { ShardRing } from '../shard/shard-ring';
import { KvPublisher } from './kv-publisher';
import { sameEndpointRecord, sameJson } from './records';
import { LeaseRecordSchema, WriterLease } from './writer-lease';

export interface StatePublisherOptions {
  readonly bus: Bus;
  readonly logger: Logger;
  readonly metrics?: WatcherMetrics;
  /** Watched namespaces; empty = all. Keys of other namespaces are never deleted. */
  readonly namespaces: readonly string[];
  readonly identity: string;
  readonly leaseTtlMs: number;
  /** An endpoint record whose numbers did not change is rewritten this often (Infinity: never; freshness says it). */
  readonly recordHeartbeatMs: number;
  /** Called when this replica becomes or stops being the writer (the registry sync follows it). */
  readonly onLeaderChange?: (leader: boolean) => void;
  /** Keys outside the watched namespaces this watcher still owns (the default Gateway's record). */
  readonly extraOwnedKeys?: readonly string[];
  /**
   * The scrape shards: endpoint records are written by the replica that owns them (it scrapes their engine), on
   * every replica, writer lease or not. Without it this replica writes every endpoint record, as the writer.
   */
  readonly shard?: ShardRing;
}

/** The writer lease's key, also the scope of the scrape-shard membership: `all`, or the sorted namespaces. */
export function watchScope(namespaces: readonly string[]): string {
  return namespaces.length === 0 ? 'all' : [...namespaces].sort().join('_');
}

/** The schema of each bucket the watcher writes. */
const SCHEMAS: Readonly<Record<string, z.ZodType>> = {
  [Buckets.endpoints]: EndpointRecordSchema,
  [Buckets.modelServers]: ModelServerRecordSchema,
  [Buckets.modelRoutes]: ModelRouteRecordSchema,
  [Buckets.externalProviders]: ExternalProviderRecordSchema,
  [Buckets.providerCredentials]: ProviderCredentialRecordSchema,
  [Buckets.engineCredentials]: EngineCredentialRecordSchema,
  [Buckets.gateways]: GatewayRecordSchema,
  [Buckets.httpRoutes]: HttpRouteRecordSchema,
};

/** Full syncs that fail are retried 250 ms, then doubling, up to 5 s apart. */
const SYNC_BACKOFF = { initialMs: 250, maxMs: 5_000 };

/**
 * Publishes the watcher's state to its KV buckets while this replica holds the writer lease. Every
 * recovery is the same move, a full sync (write everything, delete strays): after the first sync, after a NATS
 * reconnect (the server may have lost its store), when the lease is won, and after any failed write.
 */
export class StatePublisher {
  readonly endpoints: KvPublisher<EndpointRecord>;
  readonly modelServers: KvPublisher<ModelServerRecord>;
  readonly modelRoutes: KvPublisher<ModelRouteRecord>;
  readonly externalProviders: KvPublisher<ExternalProviderRecord>;
  readonly providerCredentials: KvPublisher<ProviderCredentialRecord>;
  readonly engineCredentials: KvPublisher<EngineCredentialRecord>;
  readonly gateways: KvPublisher<GatewayRecord>;
  readonly httpRoutes: KvPublisher<HttpRouteRecord>;
  readonly lease: WriterLease;
  readonly #opts: StatePublisherOptions;
  readonly #all: KvPublisher<never>[];
  /** What only the writer publishes: specs, routes, providers, Gateway API (all but the sharded endpoints). */
  readonly #specs: KvPublisher<never>[];
  #syncWanted = false;
  #syncing: Promise<void> | undefined;
  #synced = false;
  #sourceReady = false;
  #closed = false;
  #backoff: NodeJS.Timeout | undefined;
  #unsubscribeReconnect: (() => void) | undefined;

  constructor(options: StatePublisherOptions) {
    this.#opts = options;
    const scope = new Set(options.namespaces);
    const ownsNs = (ns: string | undefined) => ns !== undefined && (scope.size === 0 || scope.has(ns));
    const common = {
      logger: options.logger,
      metrics: options.metrics,
      onWriteError: () => this.requestFullSync('a write failed'),
    } as const;
    const shard = options.shard;
    this.endpoints = new KvPublisher<EndpointRecord>({
      ...common,
      bucket: Buckets.endpoints,
      // A key nobody desires any more is deleted by its shard's owner (strays of a lost replica included).
      owns: (k) => ownsNs(parseEndpointKey(k)?.namespace) && (shard === undefined || shard.owns(k)),
      ...(shard === undefined ? {} : { writes: (k: string) => shard.owns(k) }),
      same: (a, b) => sameEndpointRecord(a, b, options.recordHeartbeatMs),
    });
    const extra = new Set(options.extraOwnedKeys ?? []);
    const owns = (k: string) => extra.has(k) || ownsNs(parseObjectKey(k)?.namespace);
    const objects = <T>(bucket: string) => new KvPublisher<T>({ ...common, bucket, owns, same: sameJson });
    this.modelServers = objects<ModelServerRecord>(Buckets.modelServers);
    this.modelRoutes = objects<ModelRouteRecord>(Buckets.modelRoutes);
    this.externalProviders = objects<ExternalProviderRecord>(Buckets.externalProviders);
    this.providerCredentials = objects<ProviderCredentialRecord>(Buckets.providerCredentials);
    this.engineCredentials = objects<EngineCredentialRecord>(Buckets.engineCredentials);
    this.gateways = objects<GatewayRecord>(Buckets.gateways);
    this.httpRoutes = objects<HttpRouteRecord>(Buckets.httpRoutes);
    // What a record refers to goes first, so a reader never sees a route naming a provider or Gateway it does not
    // know yet, nor endpoints of a ModelServer it does not know.
    this.#all = [
      this.engineCredentials,
      this.modelServers,
      this.externalProviders,
      this.providerCredentials,
      this.gateways,
      this.modelRoutes,
      this.httpRoutes,
      this.endpoints,
    ] as unknown as KvPublisher<never>[];
    this.#specs = this.#all.filter((p) => p !== (this.endpoints as unknown as KvPublisher<never>));
    const leaseKey = watchScope(options.namespaces);
    this.lease = new WriterLease({
      open: () => options.bus.kv(Buckets.podWatcherLease, LeaseRecordSchema),
      key: leaseKey,
      identity: options.identity,
      ttlMs: options.leaseTtlMs,
      logger: options.logger,
      onChange: (leader) => this.#leaderChanged(leader),
    });
  }

  /** Joins the lease; writing starts once the source has delivered its first full state (`sourceSynced`). */
  async start(): Promise<void> {
    this.#unsubscribeReconnect = this.#opts.bus.onReconnect(() => {
      // The server may have lost its store: republish now (as the writer) and renew the lease alongside.
      this.requestFullSync('NATS reconnected');
      void this.lease.tick();
    });
    // Sharded endpoint records are this replica's to write whether or not it holds the lease.
    if (this.#opts.shard !== undefined) this.endpoints.setEnabled(true);
    await this.lease.start();
  }

  /** The source delivered its first full state: the first sync may run. */
  sourceSynced(): void {
    this.#sourceReady = true;
    this.requestFullSync('initial state');
  }

  /** True after the first full sync as the writer, or, for a standby, once it knows it is one. */
  get ready(): boolean {
    if (!this.#sourceReady) return false;
    if (this.lease.isLeader) return this.#synced;
    // A standby with a shard has its endpoint records to publish first.
    return this.lease.known && (this.#opts.shard === undefined || this.#synced);
  }

  get isLeader(): boolean {
    return this.lease.isLeader;
  }

  /** Resolves when everything desired is written (only meaningful for the writer). */
  async whenSettled(): Promise<void> {
    if (!this.lease.isLeader && this.#opts.shard === undefined) return;
    while (this.#syncWanted || this.#syncing) await (this.#syncing ?? new Promise((r) => setTimeout(r, 10)));
    await Promise.all(this.#written().map((p) => p.whenSettled()));
  }

  requestFullSync(reason: string): void {
    if (this.#closed || !this.#sourceReady) return;
    this.#syncWanted = true;
    if (!this.lease.isLeader && this.#opts.shard === undefined) return;
    this.#syncing ??= this.#runSyncs(reason).finally(() => {
      this.#syncing = undefined;
      // A request made after the loop's last look (a failed write's handler in the same microtask run) found a
      // sync still under way and was not started: start it now rather than lose it.
      if (this.#syncWanted) this.requestFullSync(reason);
    });
  }

  async #runSyncs(reason: string): Promise<void> {
    let failures = 0;
    while (this.#syncWanted && (this.lease.isLeader || this.#opts.shard !== undefined) && !this.#closed) {
      this.#syncWanted = false;
      const started = performance.now();
      try {
        // The writer publishes everything (what a record refers to first); a standby only its endpoint shard.
        for (const p of this.#written()) await p.fullSync(await this.#open(p.bucket));
        this.#synced = true;
        this.#opts.metrics?.fullSyncs.inc({ result: 'ok' });
        this.#opts.logger.info(
          {
            reason,
            endpoints: this.endpoints.size,
            modelServers: this.modelServers.size,
            modelRoutes: this.modelRoutes.size,
            externalProviders: this.externalProviders.size,
            gateways: this.gateways.size,
            httpRoutes: this.httpRoutes.size,
            ms: Math.round(performance.now() - started),
          },
          'published full state',
        );
        failures = 0;
      } catch (err) {
        const delay = backoffDelay(SYNC_BACKOFF, failures++);
        this.#syncWanted = true;
        this.#opts.metrics?.fullSyncs.inc({ result: 'error' });
        this.#opts.logger.warn({ reason, err: (err as Error).message, retryInMs: delay }, 'full sync failed');
        await new Promise<void>((resolve) => {
          this.#backoff = setTimeout(resolve, delay);
        });
      }
    }
  }

  #open(bucket: string) {
    const schema = SCHEMAS[bucket];
    return this.#opts.bus.kv(bucket, schema) as unknown as Promise<{
      put(k: string, v: never): Promise<number>;
      delete(k: string): Promise<void>;
      keys(f?: string): Promise<string[]>;
    }>;
  }

  /** The publishers this replica writes now: all as the writer, else its endpoint shard (if sharded). */
  #written(): KvPublisher<never>[] {
    if (this.lease.isLeader) return this.#all;
    return this.#opts.shard === undefined ? [] : [this.endpoints as unknown as KvPublisher<never>];
  }

  #leaderChanged(leader: boolean): void {
    for (const p of this.#opts.shard === undefined ? this.#all : this.#specs) p.setEnabled(leader);
    this.#opts.onLeaderChange?.(leader);
    if (leader) this.requestFullSync('won the writer lease');
  }

  /**
   * Re-publishes this replica's endpoint shard (writes its records, deletes strays it now owns: records of pods
   * that went away while their old owner was gone). Run a little after the shards changed, once the engines that
   * moved here were scraped.
   */
  async resyncEndpoints(reason: string): Promise<void> {
    if (this.#closed || !this.#sourceReady || this.#opts.shard === undefined) return;
    try {
      await this.endpoints.fullSync(await this.#open(this.endpoints.bucket), { rewrite: false });
      this.#opts.logger.info({ reason, endpoints: this.endpoints.size }, 'resynced endpoint shard');
    } catch (err) {
      this.requestFullSync(`endpoint shard resync failed: ${(err as Error).message}`);
    }
  }

  /** Stops writing and gives up the lease (after the pending writes, so a standby starts from them). */
  async close(): Promise<void> {
    this.#closed = true;
    if (this.#backoff) clearTimeout(this.#backoff);
    this.#unsubscribeReconnect?.();
    await this.#syncing;
    if (this.lease.isLeader || this.#opts.shard !== undefined) {
      let timer: NodeJS.Timeout | undefined;
      const giveUp = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, 2000);
      });
      await Promise.race([Promise.all(this.#written().map((p) => p.whenSettled())), giveUp]);
      clearTimeout(timer);
    }
    await this.lease.release();
  }
}
