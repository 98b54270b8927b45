import { endpointKey, objectKey, type EndpointRecord, type ModelServerRecord, type ScrapeFreshnessRecord } from '@triad/bus';
import { IndexedEndpoint, type Endpoint } from './endpoint';
import { ModelServerPool } from './model-server-pool';

/** A change to the endpoints bucket; `KvChange<EndpointRecord>` from the bus client has this shape. */
export type EndpointChange = { op: 'PUT'; value: EndpointRecord; key?: string } | { op: 'DEL'; key: string };
/** A change to the scrape-freshness bucket; `KvChange<ScrapeFreshnessRecord>` has this shape. */
export type ScrapeFreshnessChange = { op: 'PUT'; value: ScrapeFreshnessRecord; key: string } | { op: 'DEL'; key: string };
/** A change to the ModelServers bucket; `KvChange<ModelServerRecord>` has this shape. */
export type ModelServerChange = { op: 'PUT'; value: ModelServerRecord; key?: string } | { op: 'DEL'; key: string };

/**
 * The in-memory view of the pod-watcher's KV buckets that scheduling reads. Each change costs O(1): a metrics
 * update swaps the record in place, and role, group or readiness changes move the endpoint between the
 * per-ModelServer lists. The scheduler app feeds it from KV watches; a gateway feeds it from its own.
 */
export class EndpointIndex {
  readonly #endpoints = new Map<string, IndexedEndpoint>();
  readonly #pools = new Map<string, ModelServerPool>();
  readonly #removedListeners = new Set<(key: string) => void>();
  /** Pod-watcher replica → when it last confirmed the engines it scrapes (its scrape-freshness record). */
  readonly #confirmedAt = new Map<string, number>();
  /** Freshness KV key → the replica its record names (a deletion only carries the key). */
  readonly #freshnessKeys = new Map<string, string>();
  /** Endpoints by the replica whose scrapes their records carry (`scrapedBy`). */
  readonly #byScraper = new Map<string, Set<IndexedEndpoint>>();

  /** Applies one change of the endpoints bucket. */
  applyEndpoint(change: EndpointChange): void {
    if (change.op === 'DEL') {
      this.#remove(change.key);
      return;
    }
    const r = change.value;
    const key = change.key ?? endpointKey(r.namespace, r.modelServer, r.pod);
    const existing = this.#endpoints.get(key);
    if (!existing) {
      const e = new IndexedEndpoint(key, r);
      this.#endpoints.set(key, e);
      this.#track(e, undefined);
      this.#pool(r.namespace, r.modelServer).attach(e);
      return;
    }
    const oldPool = this.#pool(existing.record.namespace, existing.record.modelServer);
    const wasListed = existing.listId !== '';
    const scrapedBy = existing.record.scrapedBy;
    const moved = existing.update(r);
    this.#track(existing, scrapedBy);
    if (moved || !wasListed) {
      oldPool.detach(existing);
      this.#pool(r.namespace, r.modelServer).attach(existing);
    } else {
      oldPool.refresh(existing);
    }
  }

  /**
   * Applies one change of the scrape-freshness bucket: the endpoints whose records that replica wrote are aged by
   * its confirmation time from now on (a lower time than before lowers it again: the replica no longer vouches for
   * the later one).
   */
  applyFreshness(change: ScrapeFreshnessChange): void {
    let replica: string | undefined;
    if (change.op === 'PUT') {
      replica = change.value.replica;
      this.#freshnessKeys.set(change.key, replica);
      this.#confirmedAt.set(replica, change.value.confirmedAt);
    } else {
      replica = this.#freshnessKeys.get(change.key);
      this.#freshnessKeys.delete(change.key);
      if (replica === undefined) return;
      this.#confirmedAt.delete(replica);
    }
    for (const e of this.#byScraper.get(replica) ?? []) {
      if (e.confirm(this.#confirmedAt)) this.#pools.get(objectKey(e.record.namespace, e.record.modelServer))?.refresh(e);
    }
  }

  /** Applies one change of the ModelServers bucket. */
  applyModelServer(change: ModelServerChange): void {
    if (change.op === 'DEL') {
      const pool = this.#pools.get(change.key);
      if (pool) pool.record = undefined;
      return;
    }
    const r = change.value;
    this.#pool(r.namespace, r.name).record = r;
  }

  /** Calls `listener(key)` after an endpoint leaves the index (plugins drop per-endpoint state). */
  onEndpointRemoved(listener: (key: string) => void): () => void {
    this.#removedListeners.add(listener);
    return () => this.#removedListeners.delete(listener);
  }

  get(key: string): Endpoint | undefined {
    return this.#endpoints.get(key);
  }

  /** @internal The index's own endpoint object (scheduler scratch fields included). */
  getIndexed(key: string): IndexedEndpoint | undefined {
    return this.#endpoints.get(key);
  }

  /**
   * The endpoints and record of one ModelServer, or undefined when neither has been seen. The pool last found is
   * kept with its names (a pool, once made, stays: a deleted ModelServer only loses its record), so a run of
   * requests for one ModelServer builds and hashes no key (two regex replaces, a join, a lookup per decision).
   */
  pool(namespace: string, name: string): ModelServerPool | undefined {
    if (namespace === this.#lastNamespace && name === this.#lastName) return this.#lastPool;
    const pool = this.#pools.get(objectKey(namespace, name));
    if (pool !== undefined) {
      this.#lastNamespace = namespace;
      this.#lastName = name;
      this.#lastPool = pool;
    }
    return pool;
  }

  #lastNamespace: string | undefined;
  #lastName: string | undefined;
  #lastPool: ModelServerPool | undefined;

  get size(): number {
    return this.#endpoints.size;
  }

  /** Endpoint counts by role, ready ones only (for metrics and readiness). */
  countByRole(): Record<'aggregated' | 'encode' | 'prefill' | 'decode', number> {
    const out = { aggregated: 0, encode: 0, prefill: 0, decode: 0 };
    for (const e of this.#endpoints.values()) if (e.listId !== '') out[e.record.role]++;
    return out;
  }

  /** Ready endpoints without usable metrics (never scraped, or marked stale): what `stale-metrics` drops. */
  countWithoutMetrics(): number {
    let n = 0;
    for (const e of this.#endpoints.values()) if (e.listId !== '' && (e.stale || !(e.scrapedAt > 0))) n++;
    return n;
  }

  /** Number of ModelServer records known. */
  get modelServerCount(): number {
    let n = 0;
    for (const p of this.#pools.values()) if (p.record) n++;
    return n;
  }

  /** Files `e` under the replica its record names (it was under `before`) and ages it by that replica's confirmation. */
  #track(e: IndexedEndpoint, before: string | undefined): void {
    const scrapedBy = e.record.scrapedBy;
    if (scrapedBy !== before) {
      if (before !== undefined) this.#untrack(e, before);
      if (scrapedBy !== undefined) {
        let set = this.#byScraper.get(scrapedBy);
        if (set === undefined) this.#byScraper.set(scrapedBy, (set = new Set()));
        set.add(e);
      }
    }
    if (scrapedBy !== undefined) e.confirm(this.#confirmedAt);
  }

  #untrack(e: IndexedEndpoint, scrapedBy: string): void {
    const set = this.#byScraper.get(scrapedBy);
    set?.delete(e);
    if (set?.size === 0) this.#byScraper.delete(scrapedBy);
  }

  #remove(key: string): void {
    const e = this.#endpoints.get(key);
    if (!e) return;
    if (e.record.scrapedBy !== undefined) this.#untrack(e, e.record.scrapedBy);
    this.#pools.get(objectKey(e.record.namespace, e.record.modelServer))?.detach(e);
    this.#endpoints.delete(key);
    for (const l of this.#removedListeners) l(key);
  }

  #pool(namespace: string, name: string): ModelServerPool {
    const k = objectKey(namespace, name);
    let p = this.#pools.get(k);
    if (!p) {
      p = new ModelServerPool(namespace, name);
      this.#pools.set(k, p);
    }
    return p;
  }
}
