import {
  Buckets,
  EndpointRecordSchema,
  ModelRouteRecordSchema,
  ModelServerRecordSchema,
  ScrapeFreshnessRecordSchema,
  parseObjectKey,
} from '@triad/bus';
import type { EndpointRecord, ModelServerRecord, ScrapeFreshnessRecord } from '@triad/bus';
import type { Bus, KvChange, KvWatchHandle } from '@triad/bus/client';
import { serverProfileOf } from '@triad/connectors';
import type { ServerProfile, StageTimeouts } from '@triad/request';
import { RouteTable } from '../routing/route-table';

/** A ModelServer as the gateway uses it: the record and its resolved connector profile. */
export interface ServerEntry {
  readonly record: ModelServerRecord;
  readonly profile: ServerProfile;
}

/** Listeners for the local scheduling fallback, fed the same changes in the same order. */
export interface KvViewListener {
  endpoint(change: KvChange<EndpointRecord>): void;
  modelServer(change: KvChange<ModelServerRecord>): void;
  /** A pod-watcher replica's scrape freshness (what ages the endpoints it scrapes). */
  freshness?(change: KvChange<ScrapeFreshnessRecord>): void;
}

/**
 * The gateway's view of the pod-watcher's KV buckets: routes (compiled into a RouteTable), ModelServers (with
 * their connector profiles) and endpoints. Fed by KV watches, so every change lands incrementally; `synced`
 * resolves once the three buckets have been replayed (readiness).
 */
export class KvView {
  readonly routes = new RouteTable();
  readonly #servers = new Map<string, ServerEntry>();
  readonly #endpoints = new Map<string, EndpointRecord>();
  readonly #freshness = new Map<string, ScrapeFreshnessRecord>();
  readonly #addressUsers = new Map<string, number>();
  readonly #listeners: KvViewListener[] = [];
  readonly #timeouts: StageTimeouts;
  readonly #onAddressGone: (ip: string, port: number) => void;
  #watches: KvWatchHandle[] = [];
  #synced = false;

  constructor(timeouts: StageTimeouts, onAddressGone: (ip: string, port: number) => void) {
    this.#timeouts = timeouts;
    this.#onAddressGone = onAddressGone;
  }

  get synced(): boolean {
    return this.#synced;
  }

  addListener(listener: KvViewListener): void {
    this.#listeners.push(listener);
    for (const [key, value] of this.#freshness) listener.freshness?.({ key, op: 'PUT', value, revision: 0 });
    for (const [key, value] of this.#endpoints) listener.endpoint({ key, op: 'PUT', value, revision: 0 });
    for (const [, e] of this.#servers) listener.modelServer({ key: '', op: 'PUT', value: e.record, revision: 0 });
  }

  /** Starts the watches; resolves once every bucket's current content has been applied. */
  async start(bus: Bus): Promise<void> {
    const [servers, routes, freshness, endpoints] = await Promise.all([
      bus.kv(Buckets.modelServers, ModelServerRecordSchema),
      bus.kv(Buckets.modelRoutes, ModelRouteRecordSchema),
      bus.kv(Buckets.scrapeFreshness, ScrapeFreshnessRecordSchema),
      bus.kv(Buckets.endpoints, EndpointRecordSchema),
    ]);
    this.#watches = await Promise.all([
      servers.watch({ onChange: (c) => this.applyModelServer(c) }),
      routes.watch({
        onChange: (c) => {
          if (c.op === 'PUT') this.routes.put(c.value);
          else {
            const k = parseObjectKey(c.key);
            if (k) this.routes.delete(k.namespace, k.name);
          }
        },
      }),
      freshness.watch({ onChange: (c) => this.applyFreshness(c) }),
      endpoints.watch({ onChange: (c) => this.applyEndpoint(c) }),
    ]);
    await Promise.all(this.#watches.map((w) => w.synced));
    this.#synced = true;
  }

  stop(): void {
    for (const w of this.#watches) w.stop();
    this.#watches = [];
  }

  server(namespace: string, name: string): ServerEntry | undefined {
    return this.#servers.get(`${namespace}/${name}`);
  }

  endpoint(key: string): EndpointRecord | undefined {
    return this.#endpoints.get(key);
  }

  applyModelServer(change: KvChange<ModelServerRecord>): void {
    if (change.op === 'PUT') {
      const r = change.value;
      this.#servers.set(`${r.namespace}/${r.name}`, { record: r, profile: serverProfileOf(r, this.#timeouts) });
    } else {
      const k = parseObjectKey(change.key);
      if (k) this.#servers.delete(`${k.namespace}/${k.name}`);
    }
    for (const l of this.#listeners) l.modelServer(change);
  }

  applyFreshness(change: KvChange<ScrapeFreshnessRecord>): void {
    if (change.op === 'PUT') this.#freshness.set(change.key, change.value);
    else this.#freshness.delete(change.key);
    for (const l of this.#listeners) l.freshness?.(change);
  }

  applyEndpoint(change: KvChange<EndpointRecord>): void {
    const previous = this.#endpoints.get(change.key);
    if (change.op === 'PUT') {
      this.#endpoints.set(change.key, change.value);
      if (previous === undefined || previous.ip !== change.value.ip || previous.port !== change.value.port) {
        this.#useAddress(change.value, 1);
      }
    } else {
      this.#endpoints.delete(change.key);
    }
    if (previous !== undefined && (change.op === 'DEL' || previous.ip !== change.value.ip || previous.port !== change.value.port)) {
      this.#useAddress(previous, -1);
    }
    for (const l of this.#listeners) l.endpoint(change);
  }

  /** Counts records per address, so an engine's connection pool closes when its last record goes. */
  #useAddress(e: EndpointRecord, delta: number): void {
    const address = `${e.ip}:${e.port}`;
    const n = (this.#addressUsers.get(address) ?? 0) + delta;
    if (n > 0) this.#addressUsers.set(address, n);
    else {
      this.#addressUsers.delete(address);
      this.#onAddressGone(e.ip, e.port);
    }
  }
}
