import type { Logger } from '@triad/runtime';
import type { WatcherMetrics } from '../ops/metrics';

/** The slice of a typed KV bucket the publisher writes through. */
export interface KvTarget<T> {
  put(key: string, value: T): Promise<number>;
  delete(key: string): Promise<void>;
  keys(filter?: string): Promise<string[]>;
}

export interface KvPublisherOptions<T> {
  readonly bucket: string;
  /** True when two values say the same thing (then nothing is written). */
  readonly same: (published: T, next: T) => boolean;
  /** Keys this watcher owns (its namespaces); a full sync deletes owned keys it does not know. */
  readonly owns: (key: string) => boolean;
  /**
   * Keys this replica writes (default all): a sharded bucket is written by several replicas, each its share. The
   * others' keys are kept as desired state but never written; `reshard()` after the shares changed.
   */
  readonly writes?: (key: string) => boolean;
  /** Writes in flight at once. */
  readonly concurrency?: number;
  readonly logger: Logger;
  readonly metrics?: WatcherMetrics;
  /** A write failed (NATS down, bucket gone): the owner should run a full sync once it can. */
  readonly onWriteError: (err: Error) => void;
}

/**
 * Mirrors a desired key → value map into one KV bucket, writing only what changed. Changes are coalesced per
 * key (a key changed three times while its write was in flight is written once more, with the latest value),
 * each key has at most one write in flight so a put and a later delete cannot swap, and nothing is written
 * unless `enable`d (this replica holds the writer lease).
 */
export class KvPublisher<T> {
  readonly #desired = new Map<string, T>();
  /** What this process last wrote (and KV acknowledged) per key. */
  readonly #published = new Map<string, T>();
  /** Key → when it first differed from what is published (for the publish-latency histogram). */
  readonly #dirty = new Map<string, number>();
  /** Key → the value its write in flight puts (undefined: a delete). */
  readonly #inFlight = new Map<string, T | undefined>();
  /** Key with a write in flight → when it first differed from what is published. */
  readonly #inFlightSince = new Map<string, number>();
  readonly #opts: KvPublisherOptions<T>;
  readonly #concurrency: number;
  #kv: KvTarget<T> | undefined;
  #enabled = false;
  /** Full syncs asked for and not finished (writes wait while there are any). */
  #syncs = 0;
  #lastSync: Promise<void> = Promise.resolve();
  #broken = false;
  #scheduled = false;
  /** Waiting for everything written (tests, benchmarks, shutdown). */
  readonly #settled = new Set<() => void>();

  constructor(options: KvPublisherOptions<T>) {
    this.#opts = options;
    this.#concurrency = options.concurrency ?? 64;
  }

  get bucket(): string {
    return this.#opts.bucket;
  }

  set(key: string, value: T): void {
    this.#desired.set(key, value);
    if (this.#opts.writes !== undefined && !this.#opts.writes(key)) return;
    // A key with a write in flight is compared with what that write puts, not with what KV held before it:
    // otherwise every scrape during a slow write would queue a second write of the same content.
    const base = this.#inFlight.has(key) ? this.#inFlight.get(key) : this.#published.get(key);
    if (base === undefined || !this.#opts.same(base, value)) this.#markDirty(key);
    // Its completion compares once more with the latest desired value.
    else this.#dirty.delete(key);
  }

  remove(key: string): void {
    if (!this.#desired.delete(key)) return;
    if (this.#opts.writes !== undefined && !this.#opts.writes(key)) {
      this.#published.delete(key);
      this.#dirty.delete(key);
      return;
    }
    if (this.#published.has(key) || this.#inFlight.has(key)) this.#markDirty(key);
    else this.#dirty.delete(key);
  }

  get(key: string): T | undefined {
    return this.#desired.get(key);
  }

  keys(): IterableIterator<string> {
    return this.#desired.keys();
  }

  get size(): number {
    return this.#desired.size;
  }

  /**
   * Since when (ms since epoch) some desired value this replica writes has not been acknowledged by KV (changed and
   * waiting, or being written); undefined when everything is published. What KV holds is current up to then.
   */
  unpublishedSince(): number | undefined {
    let oldest = Number.POSITIVE_INFINITY;
    for (const since of this.#dirty.values()) if (since < oldest) oldest = since;
    for (const since of this.#inFlightSince.values()) if (since < oldest) oldest = since;
    return oldest === Number.POSITIVE_INFINITY ? undefined : Date.now() - (performance.now() - oldest);
  }

  /** Starts (true) or stops (false) writing; stopping leaves in-flight writes to finish. */
  setEnabled(enabled: boolean): void {
    this.#enabled = enabled;
    if (enabled) this.#schedule();
  }

  /** True when every desired value is written and acknowledged. */
  get settled(): boolean {
    return this.#dirty.size === 0 && this.#inFlight.size === 0 && this.#syncs === 0;
  }

  /** Resolves once everything is written (or at once when nothing is pending). */
  whenSettled(): Promise<void> {
    if (this.settled) return Promise.resolve();
    return new Promise((resolve) => this.#settled.add(resolve));
  }

  /**
   * Writes every desired value and deletes every owned key the bucket holds that is not desired, through `kv`
   * (freshly opened, so a bucket lost with the NATS store is recreated). Used at start, after a reconnect, when
   * this replica wins the lease, and to recover from failed writes. Throws when a write fails.
   */
  fullSync(kv: KvTarget<T>, options: { rewrite?: boolean } = {}): Promise<void> {
    // Syncs run one after the other (the writer's and the shard resync can be asked for at once): two at once would
    // interleave their writes and deletes, and the first to end would resume writing while the other still ran.
    this.#syncs++;
    const run = this.#lastSync
      .then(() => this.#syncNow(kv, options.rewrite ?? true))
      .finally(() => {
        this.#syncs--;
        this.#schedule();
        this.#notifySettled();
      });
    this.#lastSync = run.catch(() => undefined);
    return run;
  }

  async #syncNow(kv: KvTarget<T>, rewrite: boolean): Promise<void> {
    // Writes still in flight (perhaps hanging on a lost server) are not waited for: they went out earlier on the
    // same connection, so the sync's writes land after them, and their completion re-checks the key.
    this.#kv = kv;
    const existing = new Set(await kv.keys());
    const writes = this.#opts.writes;
    const mine = writes === undefined ? [...this.#desired] : [...this.#desired].filter(([key]) => writes(key));
    // Without `rewrite`, values this process already published unchanged are left as they are.
    const entries = rewrite
      ? mine
      : mine.filter(([key, value]) => {
          const pub = this.#published.get(key);
          return pub === undefined || !existing.has(key) || !this.#opts.same(pub, value);
        });
    await forEachLimit(entries, this.#concurrency, async ([key, value]) => {
      await kv.put(key, value);
      this.#acknowledged(key, value);
      this.#opts.metrics?.kvWrites.inc({ bucket: this.bucket, op: 'put', result: 'ok' });
    });
    const stray = [...existing].filter((k) => !this.#desired.has(k) && this.#opts.owns(k));
    await forEachLimit(stray, this.#concurrency, async (key) => {
      await kv.delete(key);
      this.#published.delete(key);
      this.#opts.metrics?.kvWrites.inc({ bucket: this.bucket, op: 'delete', result: 'ok' });
    });
    for (const key of [...this.#published.keys()]) if (!existing.has(key) && !this.#desired.has(key)) this.#published.delete(key);
    this.#broken = false;
    // Changes that arrived while the sync ran are still to be written.
    for (const [key, value] of this.#desired) {
      if (writes !== undefined && !writes(key)) {
        this.#dirty.delete(key);
        continue;
      }
      const pub = this.#published.get(key);
      if (pub === undefined || !this.#opts.same(pub, value)) this.#markDirty(key);
      else this.#dirty.delete(key);
    }
    for (const key of this.#published.keys()) if (!this.#desired.has(key)) this.#markDirty(key);
  }

  #markDirty(key: string): void {
    if (!this.#dirty.has(key)) this.#dirty.set(key, performance.now());
    this.#schedule();
  }

  #schedule(): void {
    if (this.#scheduled) return;
    this.#scheduled = true;
    // One flush per event-loop turn: a burst of changes (a relist, a file reload) goes out together.
    setImmediate(() => {
      this.#scheduled = false;
      this.#flush();
    });
  }

  /**
   * The shares changed: keys that stopped being this replica's are let go (their new owner writes them, so what
   * this replica published of them is forgotten). A key that became this replica's has no published copy here,
   * so it is written at its next `set` (its engine's first scrape here), not before with a view this replica
   * never scraped. Keys that stayed are not touched.
   */
  reshard(): void {
    const writes = this.#opts.writes;
    if (writes === undefined) return;
    for (const key of [...this.#published.keys()]) if (!writes(key)) this.#published.delete(key);
    for (const key of [...this.#dirty.keys()]) if (!writes(key) && this.#desired.has(key)) this.#dirty.delete(key);
    this.#notifySettled();
  }

  /**
   * KV holds `value` under `key` as this process wrote it. A key that stopped being this replica's while the write
   * was in flight is not remembered: its new owner writes it, and should it come back here, the copy remembered
   * would pass for current and the key would never be written under this replica's name again.
   */
  #acknowledged(key: string, value: T): void {
    const writes = this.#opts.writes;
    if (writes !== undefined && !writes(key)) this.#published.delete(key);
    else this.#published.set(key, value);
  }

  #flush(): void {
    if (!this.#enabled || !this.#kv || this.#syncs > 0 || this.#broken) {
      this.#notifySettled();
      return;
    }
    const writes = this.#opts.writes;
    for (const [key, since] of this.#dirty) {
      if (this.#inFlight.size >= this.#concurrency) break;
      if (this.#inFlight.has(key)) continue;
      if (writes !== undefined && !writes(key) && this.#desired.has(key)) {
        this.#dirty.delete(key);
        continue;
      }
      this.#dirty.delete(key);
      this.#write(this.#kv, key, since);
    }
    this.#notifySettled();
  }

  #write(kv: KvTarget<T>, key: string, since: number): void {
    const value = this.#desired.get(key);
    const op = value === undefined ? 'delete' : 'put';
    this.#inFlight.set(key, value);
    this.#inFlightSince.set(key, since);
    const done = value === undefined ? kv.delete(key) : kv.put(key, value);
    done
      .then(
        () => {
          if (value === undefined) this.#published.delete(key);
          else this.#acknowledged(key, value);
          // The key may have changed while this write was in flight, even back to what was published before it.
          const now = this.#desired.get(key);
          if (now === undefined ? value !== undefined : value === undefined || !this.#opts.same(value, now)) this.#markDirty(key);
          this.#opts.metrics?.kvWrites.inc({ bucket: this.bucket, op, result: 'ok' });
          this.#opts.metrics?.publishLatency.observe({ bucket: this.bucket }, (performance.now() - since) / 1000);
        },
        (err: Error) => {
          if (!this.#dirty.has(key)) this.#dirty.set(key, since);
          this.#opts.metrics?.kvWrites.inc({ bucket: this.bucket, op, result: 'error' });
          if (!this.#broken) this.#opts.logger.warn({ bucket: this.bucket, key, op, err: err.message }, 'KV write failed; will resync');
          this.#broken = true;
          this.#opts.onWriteError(err);
        },
      )
      .finally(() => {
        this.#inFlight.delete(key);
        this.#inFlightSince.delete(key);
        this.#schedule();
        this.#notifySettled();
      });
  }

  #notifySettled(): void {
    if (!this.settled) return;
    for (const resolve of this.#settled) resolve();
    this.#settled.clear();
  }
}

/** Runs `fn` over `items` with at most `limit` at once; rejects with the first failure (after the others settle). */
async function forEachLimit<I>(items: readonly I[], limit: number, fn: (item: I) => Promise<void>): Promise<void> {
  let next = 0;
  let failure: unknown;
  const worker = async () => {
    while (next < items.length && failure === undefined) {
      const item = items[next++];
      try {
        await fn(item);
      } catch (err) {
        failure ??= err;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  if (failure !== undefined) throw failure;
}
