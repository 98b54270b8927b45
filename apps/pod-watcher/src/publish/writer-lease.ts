import { z } from 'zod';
import { isJetStreamConflict } from '@triad/bus/client';
import type { Logger } from '@triad/runtime';

export const LeaseRecordSchema = z.object({
  holder: z.string().min(1),
  /** Holder's clock when it last renewed (for people; expiry is judged by each replica's own clock). */
  renewedAt: z.number().int(),
  ttlMs: z.number().int().positive(),
});
export type LeaseRecord = z.infer<typeof LeaseRecordSchema>;

/** The slice of a typed KV bucket the lease uses (compare-and-set on the revision). */
export interface LeaseKv {
  getEntry(key: string): Promise<{ value: LeaseRecord; revision: number } | undefined>;
  create(key: string, value: LeaseRecord): Promise<number>;
  update(key: string, value: LeaseRecord, revision: number): Promise<number>;
  delete(key: string): Promise<void>;
}

export interface WriterLeaseOptions {
  /** Opens (creating when missing) the lease bucket; called again after an error. */
  readonly open: () => Promise<LeaseKv>;
  /** Key in the bucket: replicas watching the same namespaces compete for the same key. */
  readonly key: string;
  readonly identity: string;
  readonly ttlMs: number;
  readonly logger: Logger;
  /** Called when this replica becomes (true) or stops being (false) the writer. */
  readonly onChange: (leader: boolean) => void;
  readonly now?: () => number;
}

/**
 * Single-writer lease in NATS KV, so several pod-watcher replicas never write the same records in turn (their
 * metric snapshots differ, so last-writer-wins would make records flap). The holder renews every ttl/3 with a
 * compare-and-set on the key's revision. A standby takes over with a compare-and-set once it has seen the same
 * revision for a whole ttl (measured on its own clock, so clock skew does not matter), or at once when the key
 * was deleted by a holder shutting down. A holder that cannot renew for a ttl stops writing. nats-server 2.9 has
 * no per-key TTL, hence the revision watching.
 */
export class WriterLease {
  readonly #opts: WriterLeaseOptions;
  readonly #now: () => number;
  #kv: LeaseKv | undefined;
  #leader = false;
  #known = false;
  #myRevision = 0;
  #lastRenewed = 0;
  #seenRevision = -1;
  #seenSince = 0;
  #timer: NodeJS.Timeout | undefined;
  #ticking: Promise<void> | undefined;
  #closed = false;

  constructor(options: WriterLeaseOptions) {
    this.#opts = options;
    this.#now = options.now ?? Date.now;
  }

  get isLeader(): boolean {
    return this.#leader;
  }

  /** True once the lease state was read at least once (a standby is then ready as a standby). */
  get known(): boolean {
    return this.#known;
  }

  /** Takes or follows the lease now, then every ttl/3. */
  async start(): Promise<void> {
    await this.tick();
    this.#timer = setInterval(() => void this.tick(), Math.max(100, Math.floor(this.#opts.ttlMs / 3)));
    this.#timer.unref?.();
  }

  /** One round of renew / watch / take-over. Concurrent calls share one round. */
  tick(): Promise<void> {
    this.#ticking ??= this.#round().finally(() => {
      this.#ticking = undefined;
    });
    return this.#ticking;
  }

  /** Stops renewing and, when holding the lease, deletes it so a standby takes over at once. */
  async release(): Promise<void> {
    this.#closed = true;
    if (this.#timer) clearInterval(this.#timer);
    await this.#ticking;
    if (!this.#leader) return;
    this.#set(false);
    try {
      const kv = this.#kv ?? (await this.#opts.open());
      await kv.delete(this.#opts.key);
    } catch (err) {
      this.#opts.logger.warn({ err: (err as Error).message }, 'could not release the writer lease; a standby takes over after its ttl');
    }
  }

  async #round(): Promise<void> {
    if (this.#closed) return;
    const { key, identity, ttlMs } = this.#opts;
    const now = this.#now();
    const record: LeaseRecord = { holder: identity, renewedAt: now, ttlMs };
    try {
      this.#kv ??= await this.#opts.open();
      const kv = this.#kv;
      const entry = await kv.getEntry(key);
      this.#known = true;
      if (!entry) {
        this.#myRevision = await kv.create(key, record);
        this.#won(now, 'lease was free');
      } else if (entry.value.holder === identity) {
        // Ours (renewal, or a restart under the same name): keep it.
        this.#myRevision = await kv.update(key, record, entry.revision);
        this.#won(now, 'lease renewed');
      } else if (this.#leader) {
        this.#lost(`lease taken by ${entry.value.holder}`);
      } else if (entry.revision !== this.#seenRevision) {
        this.#seenRevision = entry.revision;
        this.#seenSince = now;
      } else if (now - this.#seenSince >= ttlMs) {
        this.#myRevision = await kv.update(key, record, entry.revision);
        this.#won(now, `lease of ${entry.value.holder} expired`);
      }
    } catch (err) {
      const msg = (err as Error).message;
      if (isJetStreamConflict(err)) {
        // Another replica won the compare-and-set.
        if (this.#leader) this.#lost('lost the lease to another replica');
        this.#seenRevision = -1;
        return;
      }
      this.#kv = undefined;
      if (this.#leader && this.#now() - this.#lastRenewed >= ttlMs) this.#lost(`could not renew the lease for ${ttlMs} ms: ${msg}`);
      else this.#opts.logger.debug({ err: msg }, 'lease round failed');
    }
  }

  #won(now: number, why: string): void {
    this.#lastRenewed = now;
    if (!this.#leader) {
      this.#opts.logger.info({ identity: this.#opts.identity, revision: this.#myRevision, why }, 'holding the writer lease');
      this.#set(true);
    }
  }

  #lost(why: string): void {
    this.#opts.logger.warn({ identity: this.#opts.identity, why }, 'not the writer any more');
    this.#set(false);
  }

  #set(leader: boolean): void {
    if (this.#leader === leader) return;
    this.#leader = leader;
    this.#opts.onChange(leader);
  }
}
