import type { KV, KvEntry } from '@nats-io/kv';
import type { z } from 'zod';
import { decodeMessage, encodeMessage } from '../codec';
import { retryJetStream, type JetStreamRetryOptions } from './js-retry';

export interface TypedKvOptions {
  /** Values kept per key (1 for state, more for config so an operator can see what changed). */
  readonly history?: number;
}

/** One change seen by a watch: a new value, or the key's deletion. */
export type KvChange<T> = { key: string; op: 'PUT'; value: T; revision: number } | { key: string; op: 'DEL'; revision: number };

export interface KvWatchHandle {
  stop(): void;
  /** Resolves once the watch has delivered every value that existed when it started. */
  readonly synced: Promise<void>;
}

interface Rejecter {
  reject(where: string, error: string): void;
  /** Calls `listener` after every reconnect; returns its removal. */
  onReconnect?(listener: () => void): () => void;
}

/** How long listing a bucket's keys may take (a few hundred keys take milliseconds, a few seconds under load). */
const KEYS_TIMEOUT_MS = 10_000;

/** How often a watch checks that its consumer still exists (it vanishes with its JetStream node). */
const WATCH_CHECK_MS = 2000;

/** What nats.js's KV watch returns: entries, a stop, and its push consumer (`_data`, not in the public types). */
interface KvWatchIterator extends AsyncIterable<KvEntry & { delta?: number; isUpdate?: boolean }> {
  stop(): void;
  readonly _data?: { info(cached: boolean): Promise<{ num_pending: number }> };
}

/** A JetStream KV bucket whose values are validated against a zod schema on every read. */
export class TypedKv<S extends z.ZodType> {
  readonly #kv: KV;
  readonly #bucket: string;
  readonly #schema: S;
  readonly #rejecter: Rejecter;
  readonly #retry: JetStreamRetryOptions;

  constructor(kv: KV, bucket: string, schema: S, rejecter: Rejecter, retry: JetStreamRetryOptions = {}) {
    this.#kv = kv;
    this.#bucket = bucket;
    this.#schema = schema;
    this.#rejecter = rejecter;
    this.#retry = retry;
  }

  get bucket(): string {
    return this.#bucket;
  }

  #decode(entry: KvEntry): z.output<S> | undefined {
    const decoded = decodeMessage(this.#schema, entry.value);
    if (decoded.ok) return decoded.value;
    this.#rejecter.reject(`${this.#bucket}:${entry.key}`, decoded.error);
    return undefined;
  }

  // Every call retries through a leader election or a lost node (retryJetStream); conflicts are never retried.

  put(key: string, value: z.input<S>): Promise<number> {
    const data = encodeMessage(this.#schema, value);
    return retryJetStream(() => this.#kv.put(key, data), this.#retry);
  }

  /** Writes only when the key does not exist; rejects otherwise. */
  create(key: string, value: z.input<S>): Promise<number> {
    const data = encodeMessage(this.#schema, value);
    return retryJetStream(() => this.#kv.create(key, data), this.#retry);
  }

  /** Compare-and-set: writes only when the key is still at `revision`; rejects otherwise. */
  update(key: string, value: z.input<S>, revision: number): Promise<number> {
    const data = encodeMessage(this.#schema, value);
    return retryJetStream(() => this.#kv.update(key, data, revision), this.#retry);
  }

  async getEntry(key: string): Promise<{ value: z.output<S>; revision: number } | undefined> {
    const entry = await retryJetStream(() => this.#kv.get(key), this.#retry);
    if (!entry || entry.operation !== 'PUT') return undefined;
    const value = this.#decode(entry);
    return value === undefined ? undefined : { value, revision: entry.revision };
  }

  async get(key: string): Promise<z.output<S> | undefined> {
    return (await this.getEntry(key))?.value;
  }

  async delete(key: string): Promise<void> {
    await retryJetStream(() => this.#kv.delete(key), this.#retry);
  }

  keys(filter?: string): Promise<string[]> {
    return retryJetStream(() => this.#listKeys(filter), this.#retry);
  }

  /**
   * nats.js lists keys through an ordered push consumer and ends the listing when a message says nothing is
   * pending (or after 30 s of silence, which a bucket written to all the time never has). No request timeout
   * covers that: a consumer that never delivers left a pod-watcher's first full sync waiting for over a minute
   * on a loaded machine. So a listing has a deadline; past it the consumer is stopped and the listing fails as a
   * timeout, which retryJetStream retries with a fresh consumer.
   */
  async #listKeys(filter?: string): Promise<string[]> {
    const iter = await this.#kv.keys(filter);
    const out: string[] = [];
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      iter.stop();
    }, KEYS_TIMEOUT_MS);
    try {
      for await (const k of iter) out.push(k);
    } finally {
      clearTimeout(timer);
    }
    if (timedOut) {
      const err = new Error(`listing the keys of ${this.#bucket}: timeout after ${KEYS_TIMEOUT_MS} ms`);
      err.name = 'TimeoutError';
      throw err;
    }
    return out;
  }

  /**
   * Follows the bucket (or keys matching `key`, NATS wildcards allowed): first the current value of every key,
   * then each change. Invalid values are counted as rejected and skipped.
   *
   * The watch is a push consumer on one JetStream node. On a cluster that node can die (or lose the stream's
   * leadership): the consumer then vanishes without a word. So the watch checks its consumer every few seconds
   * (and at once after a reconnect) and, when it is gone, opens a new one resuming after the last revision it
   * delivered, so no change is lost or repeated.
   */
  async watch(opts: { key?: string; onChange: (change: KvChange<z.output<S>>) => void }): Promise<KvWatchHandle> {
    let markSynced: () => void = () => undefined;
    const synced = new Promise<void>((resolve) => {
      markSynced = resolve;
    });
    let lastRevision = 0;
    let stopped = false;
    let failures = 0;
    let checking = false;
    const open = async (resumeFrom: number): Promise<KvWatchIterator> => {
      const iter = (await this.#kv.watch({
        ...(opts.key ? { key: opts.key } : {}),
        ...(resumeFrom > 0 ? { resumeFromRevision: resumeFrom } : {}),
      })) as unknown as KvWatchIterator;
      void (async () => {
        for await (const e of iter) {
          if (stopped) break;
          if (e.revision <= lastRevision) continue; // a resumed watch never repeats what was delivered
          lastRevision = e.revision;
          if (e.operation === 'PUT') {
            const value = this.#decode(e);
            if (value !== undefined) opts.onChange({ key: e.key, op: 'PUT', value, revision: e.revision });
          } else {
            opts.onChange({ key: e.key, op: 'DEL', revision: e.revision });
          }
          if (e.delta === 0 || e.isUpdate) markSynced();
        }
      })();
      return iter;
    };
    let iter = await retryJetStream(() => open(0), this.#retry);
    // The replay ends at the entry with nothing pending after it. When nothing matched the filter at all, no
    // entry will say so: the watcher's consumer info (cached by nats.js when it created the watch) tells.
    const pending = await retryJetStream(
      async () => (iter._data ? (await iter._data.info(true)).num_pending : (await this.#kv.status()).values),
      this.#retry,
    );
    if (pending === 0) markSynced();
    const reopen = async (): Promise<void> => {
      iter.stop();
      iter = await retryJetStream(() => open(lastRevision + 1), this.#retry);
      failures = 0;
    };
    const check = async (): Promise<void> => {
      if (checking || stopped) return;
      checking = true;
      try {
        await iter._data?.info(false);
        failures = 0;
      } catch (err) {
        // "consumer not found": its node died or dropped it. Anything else twice in a row (timeouts while the
        // stream elects a leader): the consumer is as good as gone too.
        if (!stopped && (/consumer not found/i.test((err as Error).message) || ++failures >= 2)) await reopen().catch(() => undefined);
      } finally {
        checking = false;
      }
    };
    const timer = setInterval(() => void check(), WATCH_CHECK_MS);
    timer.unref();
    const offReconnect = this.#rejecter.onReconnect?.(() => void check());
    return {
      stop: () => {
        stopped = true;
        clearInterval(timer);
        offReconnect?.();
        iter.stop();
      },
      synced,
    };
  }
}
