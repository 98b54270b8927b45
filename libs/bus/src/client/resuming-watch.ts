import type { KvEntry } from '@nats-io/kv';

/** How often a watch checks that its consumer still exists (it vanishes with its JetStream node). */
export const WATCH_CHECK_MS = 2000;

/** One entry as nats.js's KV watch yields it (`delta`: messages the consumer had still to send after it). */
export type WatchEntry = KvEntry & { delta?: number };

/** A watch consumer's progress: messages it has still to send, and how many it has sent (its consumer sequence). */
export interface ConsumerProgress {
  readonly pending: number;
  readonly sent: number;
}

/** What nats.js's KV watch returns: entries, a stop, and its push consumer (`_data`, not in the public types). */
export interface KvWatchIterator extends AsyncIterable<WatchEntry> {
  stop(): void;
  readonly _data?: { info(cached: boolean): Promise<{ num_pending: number; delivered?: { consumer_seq: number } }> };
}

export interface ResumingWatchOptions {
  /**
   * Opens a nats.js watch starting at `resumeFrom` (0: the current value of every key); retried by the caller.
   * `starting`: the watch's first consumer, which its owner waits for (a start-up step), so worth waiting for
   * through a node's loss however long the cluster takes; a replacement is retried by the next check instead.
   */
  open(resumeFrom: number, starting: boolean): Promise<KvWatchIterator>;
  /**
   * Receives each entry once, never one at or below a revision already delivered for its key (the initial replay
   * comes partly out of revision order: each key's entries are in order, the keys' are not).
   */
  deliver(entry: WatchEntry): void;
  /** Told when `deliver` throws: the entry counts as delivered and the watch goes on. */
  onDeliverError(entry: WatchEntry, err: unknown): void;
  /**
   * Asks the consumer how far it is (what tells `synced` the replay is over). `starting`: the first consumer was
   * created a moment ago, so a node that does not know it yet is worth waiting for; later, "not found" means it is
   * gone (the next check replaces it).
   */
  progress(iter: KvWatchIterator, starting: boolean): Promise<ConsumerProgress>;
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
  /**
   * Resolves once every key's value as of the watch's start (or a later one) was delivered. nats.js's own marks of
   * the replay's end are early while keys are written: its `isUpdate` counts every entry against the number of keys
   * at the start (an update of a key already delivered takes the place of a superseded one still to come), and an
   * entry sent with nothing pending may be followed by others the server had already sent. So a caught-up entry
   * (`delta` 0) only makes the watch ask its consumer: nothing pending and as many entries received here as it
   * sent is the end. With 10,000 keys and 5,000 writes a second, the early marks missed 60–130 keys.
   */
  readonly synced: Promise<void>;
  readonly #opts: ResumingWatchOptions;
  #resolveSynced: () => void = () => undefined;
  #isSynced = false;
  /** Entries received from the current consumer (dropped ones included). */
  #received = 0;
  /** Entries the current consumer had sent when it had nothing left to send: receiving them ends the replay. */
  #syncAtReceived = 0;
  /**
   * Until synced, the last revision delivered per key: the replay is out of revision order across keys, so the
   * watch-wide last revision cannot tell a stale entry from one that is merely late. Dropped once synced (later
   * entries come in order).
   */
  #keyRevisions: Map<string, number> | undefined = new Map();
  #confirming = false;
  #confirmAgain = false;
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
      this.#resolveSynced = resolve;
    });
  }

  get isSynced(): boolean {
    return this.#isSynced;
  }

  #markSynced(): void {
    this.#isSynced = true;
    this.#keyRevisions = undefined;
    this.#resolveSynced();
  }

  /** Opens the first consumer and starts the checks; rejects when the first open fails. */
  async start(): Promise<void> {
    const iter = await this.#opts.open(0, true);
    this.#follow(iter);
    try {
      this.#takeProgress(iter, await this.#opts.progress(iter, true));
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
      // A replay cut short starts over (its entries came out of revision order, so none marks a point to resume
      // from); entries already delivered are dropped by their keys' revisions.
      const iter = await this.#opts.open(this.#isSynced ? this.#lastRevision + 1 : 0, false);
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
    this.#received = 0;
    this.#syncAtReceived = 0;
    void this.#pump(iter, token);
  }

  /** Asks the consumer whether the replay is over (again, if another caught-up entry came meanwhile). */
  async #confirmCaughtUp(iter: KvWatchIterator): Promise<void> {
    if (this.#confirming) {
      this.#confirmAgain = true;
      return;
    }
    this.#confirming = true;
    try {
      do {
        this.#confirmAgain = false;
        if (this.#takeProgress(iter, await this.#opts.progress(iter, false))) return;
      } while (this.#confirmAgain && !this.#stopped);
    } catch {
      // The consumer did not answer (its node is going, or the client reconnects): the next caught-up entry asks again.
    } finally {
      this.#confirming = false;
    }
  }

  /** Nothing pending: synced once as many entries as the consumer sent are received. True when that decided it. */
  #takeProgress(iter: KvWatchIterator, p: ConsumerProgress): boolean {
    if (this.#isSynced) return true;
    if (iter !== this.#iter || p.pending !== 0) return false;
    if (this.#received >= p.sent) this.#markSynced();
    else this.#syncAtReceived = p.sent;
    return true;
  }

  /** Whether `e` is news: not at or below a revision already delivered (for its key, while the replay runs). */
  #isNew(e: WatchEntry): boolean {
    const byKey = this.#keyRevisions;
    if (byKey === undefined) return e.revision > this.#lastRevision;
    const known = byKey.get(e.key);
    if (known !== undefined && e.revision <= known) return false;
    byKey.set(e.key, e.revision);
    return true;
  }

  async #pump(iter: KvWatchIterator, token: { retired: boolean }): Promise<void> {
    try {
      for await (const e of iter) {
        if (token.retired) break;
        this.#received += 1;
        if (this.#isNew(e)) {
          if (e.revision > this.#lastRevision) this.#lastRevision = e.revision;
          try {
            this.#opts.deliver(e);
          } catch (err) {
            this.#opts.onDeliverError(e, err);
          }
        }
        if (!this.#isSynced) {
          if (this.#syncAtReceived > 0 && this.#received >= this.#syncAtReceived) this.#markSynced();
          else if (e.delta === 0) void this.#confirmCaughtUp(iter);
        }
      }
    } catch {
      // nats.js ended the iterator with an error (it gave up recreating its consumer): replaced below.
    }
    if (token.retired || this.#stopped) return;
    this.#needsReplacement = true;
    void this.check();
  }
}
