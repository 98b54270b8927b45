import type { KvEntry } from '@nats-io/kv';

/** How often a watch checks that its consumer still exists (it vanishes with its JetStream node). */
export const WATCH_CHECK_MS = 2000;

/** One entry as nats.js's KV watch yields it (`delta`/`isUpdate` say where the initial replay ends). */
export type WatchEntry = KvEntry & { delta?: number; isUpdate?: boolean };

/** What nats.js's KV watch returns: entries, a stop, and its push consumer (`_data`, not in the public types). */
export interface KvWatchIterator extends AsyncIterable<WatchEntry> {
  stop(): void;
  readonly _data?: { info(cached: boolean): Promise<{ num_pending: number }> };
}

export interface ResumingWatchOptions {
  /** Opens a nats.js watch starting at `resumeFrom` (0: the current value of every key); retried by the caller. */
  open(resumeFrom: number): Promise<KvWatchIterator>;
  /** Receives each entry once, in revision order, never one at or below a revision already delivered. */
  deliver(entry: WatchEntry): void;
  /** Told when `deliver` throws: the entry counts as delivered and the watch goes on. */
  onDeliverError(entry: WatchEntry, err: unknown): void;
  /** Counts entries of the initial replay (nothing matched: the replay is empty and `synced` resolves at once). */
  pendingAtStart(iter: KvWatchIterator): Promise<number>;
  /** Registers a listener called after every reconnect of the client; returns its removal. */
  onReconnect?(listener: () => void): () => void;
  checkEveryMs?: number;
}

/**
 * A KV watch that outlives its consumer.
 *
 * nats.js's watch is an ordered push consumer living on one JetStream node. On a cluster that node can die (or
 * lose the stream): the consumer then vanishes without a word, and nats.js notices only after two missed idle
 * heartbeats (10 s, then 60 s for the consumer it recreates). So the watch asks for its consumer's info every
 * couple of seconds (and at once after a reconnect); a consumer that is not found or does not answer is replaced
 * at once by a new one resuming after the last revision delivered. Replacing a live consumer costs one consumer
 * create and no entry (revisions at or below the last delivered are dropped), so a slow answer is treated like a
 * lost consumer: waiting for a second failed check doubled the time a watch stayed blind after a node died.
 * A replacement that fails, or an iterator that ends on its own, leaves the watch marked for replacement, and
 * every later check retries it until one succeeds.
 */
export class ResumingWatch {
  readonly synced: Promise<void>;
  readonly #opts: ResumingWatchOptions;
  #markSynced: () => void = () => undefined;
  #iter: KvWatchIterator | undefined;
  /** The running iterator's token: set when the watch retires it, so its end is not taken for a failure. */
  #current = { retired: false };
  #lastRevision = 0;
  #stopped = false;
  #checking = false;
  #needsReplacement = false;
  #timer: NodeJS.Timeout | undefined;
  #offReconnect: (() => void) | undefined;

  constructor(opts: ResumingWatchOptions) {
    this.#opts = opts;
    this.synced = new Promise<void>((resolve) => {
      this.#markSynced = resolve;
    });
  }

  /** Opens the first consumer and starts the checks; rejects when the first open fails. */
  async start(): Promise<void> {
    const iter = await this.#opts.open(0);
    this.#follow(iter);
    try {
      if ((await this.#opts.pendingAtStart(iter)) === 0) this.#markSynced();
    } catch (err) {
      this.stop();
      throw err;
    }
    this.#timer = setInterval(() => void this.check(), this.#opts.checkEveryMs ?? WATCH_CHECK_MS);
    this.#timer.unref();
    this.#offReconnect = this.#opts.onReconnect?.(() => void this.check());
  }

  /** The last revision handed to `deliver` (0 before the first). */
  get lastRevision(): number {
    return this.#lastRevision;
  }

  /** Checks the consumer and replaces it when it is gone, unanswered, or already known to be dead. */
  async check(): Promise<void> {
    if (this.#checking || this.#stopped) return;
    this.#checking = true;
    try {
      if (!this.#needsReplacement) {
        try {
          await this.#iter?._data?.info(false);
          return;
        } catch {
          // "consumer not found" (its node died or dropped it) or no answer in time: replaced below.
        }
      }
      if (!this.#stopped) await this.#replace();
    } finally {
      this.#checking = false;
    }
  }

  stop(): void {
    this.#stopped = true;
    clearInterval(this.#timer);
    this.#offReconnect?.();
    this.#current.retired = true;
    this.#iter?.stop();
  }

  async #replace(): Promise<void> {
    this.#current.retired = true;
    this.#iter?.stop();
    try {
      const iter = await this.#opts.open(this.#lastRevision + 1);
      if (this.#stopped) {
        iter.stop();
        return;
      }
      this.#needsReplacement = false;
      this.#follow(iter);
    } catch {
      // The cluster has no leader for the stream yet, or the client is reconnecting: the next check retries.
      this.#needsReplacement = true;
    }
  }

  #follow(iter: KvWatchIterator): void {
    const token = { retired: false };
    this.#current = token;
    this.#iter = iter;
    void this.#pump(iter, token);
  }

  async #pump(iter: KvWatchIterator, token: { retired: boolean }): Promise<void> {
    try {
      for await (const e of iter) {
        if (token.retired) break;
        if (e.revision <= this.#lastRevision) continue;
        this.#lastRevision = e.revision;
        try {
          this.#opts.deliver(e);
        } catch (err) {
          this.#opts.onDeliverError(e, err);
        }
        if (e.delta === 0 || e.isUpdate) this.#markSynced();
      }
    } catch {
      // nats.js ended the iterator with an error (it gave up recreating its consumer): replaced below.
    }
    if (token.retired || this.#stopped) return;
    this.#needsReplacement = true;
    void this.check();
  }
}
