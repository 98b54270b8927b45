import type { KV } from '@nats-io/kv';
import type { Subscription } from '@nats-io/transport-node';
import { isJetStreamConflict, openKvBucket, type Bus } from '@triad/bus/client';
import { Buckets, Subjects, decodeMessage } from '@triad/bus';
import type { AdmissionLogger } from '../logger';
import { BudgetRecordSchema, type BudgetRecord } from './budget-record';
import { LeaseMessageSchema, StoreUnavailableError, isStale, type BudgetStore, type LeaseMessage, type StoredRecord } from './budget-store';

const encoder = new TextEncoder();

/**
 * Budget records in a JetStream KV bucket (history 1), written only with compare-and-set on the entry's
 * revision. nats-server 2.9 has no per-key TTL, so the window id lives in each value and {@link sweep} deletes
 * records whose windows are over (also with compare-and-set, so a record a replica just revived survives).
 * The store answers "unavailable" at once while the connection is down instead of waiting for a timeout.
 */
export class NatsBudgetStore implements BudgetStore {
  readonly backend = 'nats';
  readonly #bus: Bus;
  readonly #bucket: string;
  readonly #timeoutMs: number;
  readonly #logger: AdmissionLogger;
  #kv: Promise<KV> | undefined;
  #connected: boolean;
  #sub: Subscription | undefined;
  readonly #handlers = new Set<(m: LeaseMessage) => void>();
  #closed = false;
  #statusIter: (AsyncIterable<{ type: string }> & { stop?: () => void }) | undefined;

  constructor(bus: Bus, opts: { bucket?: string; timeoutMs: number; logger: AdmissionLogger }) {
    this.#bus = bus;
    this.#bucket = opts.bucket ?? Buckets.admission;
    this.#timeoutMs = opts.timeoutMs;
    this.#logger = opts.logger;
    this.#connected = !bus.nc.isClosed();
    void this.#followStatus();
  }

  get available(): boolean {
    return this.#connected && !this.#closed;
  }

  async #followStatus(): Promise<void> {
    this.#statusIter = this.#bus.nc.status() as AsyncIterable<{ type: string }> & { stop?: () => void };
    for await (const s of this.#statusIter) {
      if (this.#closed) break;
      if (s.type === 'disconnect' || s.type === 'close') this.#connected = false;
      else if (s.type === 'reconnect') this.#connected = true;
    }
  }

  /**
   * Opens the bucket on first use (and again after a failure), so a gateway can start before NATS is up. It counts
   * as open once its stream serves it (gateway replicas that start together create it at the same moment), and the
   * open is bounded by the store timeout: the request waiting for it is decided by failMode after that.
   */
  #open(): Promise<KV> {
    if (!this.#kv) {
      this.#kv = openKvBucket(this.#bus.nc, this.#bucket, {
        bucket: { history: 1, replicas: this.#bus.kvReplicas },
        timeoutMs: this.#timeoutMs,
        budgetMs: this.#timeoutMs,
      });
      this.#kv.catch(() => {
        this.#kv = undefined;
      });
    }
    return this.#kv;
  }

  async #op<T>(what: string, fn: (kv: KV) => Promise<T>): Promise<T> {
    if (!this.available) throw new StoreUnavailableError(`NATS is not connected (${what})`);
    try {
      return await fn(await this.#open());
    } catch (err) {
      if (isJetStreamConflict(err)) throw err;
      throw new StoreUnavailableError(`NATS KV ${what} failed: ${(err as Error).message}`, { cause: err });
    }
  }

  async read(key: string): Promise<StoredRecord> {
    const entry = await this.#op('get', (kv) => kv.get(key));
    if (!entry) return { record: undefined, revision: 0 };
    if (entry.operation !== 'PUT') return { record: undefined, revision: entry.revision };
    const decoded = decodeMessage(BudgetRecordSchema, entry.value);
    if (!decoded.ok) this.#logger.warn({ key, error: decoded.error }, 'invalid budget record; it will be replaced');
    // An unreadable record is replaced by the next write (the revision still guards the race).
    return { record: decoded.ok ? decoded.value : undefined, revision: entry.revision };
  }

  async write(key: string, record: BudgetRecord, revision: number): Promise<boolean> {
    const data = encoder.encode(JSON.stringify(record));
    try {
      // A deleted key has a revision too: update() on it works, create() is only for keys never written.
      await this.#op('write', (kv) => (revision === 0 ? kv.create(key, data) : kv.update(key, data, revision)));
      return true;
    } catch (err) {
      if (isJetStreamConflict(err)) return false;
      throw err;
    }
  }

  publish(message: LeaseMessage): void {
    if (!this.available) return;
    this.#bus.publish(Subjects.admissionLease, LeaseMessageSchema, message);
  }

  subscribe(handler: (message: LeaseMessage) => void): () => void {
    this.#handlers.add(handler);
    this.#sub ??= this.#bus.subscribe(Subjects.admissionLease, LeaseMessageSchema, (m) => this.#handlers.forEach((h) => h(m)));
    return () => this.#handlers.delete(handler);
  }

  async sweep(now: number): Promise<number> {
    const keys = await this.#op('keys', async (kv) => {
      const out: string[] = [];
      for await (const k of await kv.keys()) out.push(k);
      return out;
    });
    let removed = 0;
    for (const key of keys) {
      const { record, revision } = await this.read(key);
      if (revision === 0 || (record && !isStale(record, now))) continue;
      try {
        await this.#op('purge', (kv) => kv.purge(key, { previousSeq: revision }));
        removed++;
      } catch {
        // Written meanwhile (a replica revived it) or already gone: either way it is not ours to remove.
      }
    }
    return removed;
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#statusIter?.stop?.();
    this.#sub?.unsubscribe();
    this.#handlers.clear();
  }
}
