import type { KV, KvEntry } from '@nats-io/kv';
import type { Bucket } from '@nats-io/kv/internal';
import type { z } from 'zod';
import { decodeMessage, encodeMessage } from '../codec';
import { NOT_YET_VISIBLE, retryJetStream, startUpRetry, type JetStreamRetryOptions } from './js-retry';
import { ResumingWatch, type KvWatchIterator } from './resuming-watch';
import type { JetStreamPublisher } from './js-publisher';

export interface TypedKvOptions {
  /** Values kept per key (1 for state, more for config so an operator can see what changed). */
  readonly history?: number;
  /** Values older than this are dropped by the server (set when the bucket is created; absent: kept). */
  readonly ttlMs?: number;
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

/** What nats.js's bucket uses to turn a key into the subject its put publishes on (public on its Bucket class). */
type KeySubjects = Pick<Bucket, 'encodeKey' | 'validateKey' | 'subjectForKey'>;

/** How long listing a bucket's keys may take (a few hundred keys take milliseconds, a few seconds under load). */
const KEYS_TIMEOUT_MS = 10_000;

/** A JetStream KV bucket whose values are validated against a zod schema on every read. */
export class TypedKv<S extends z.ZodType> {
  readonly #kv: KV;
  readonly #bucket: string;
  readonly #schema: S;
  readonly #rejecter: Rejecter;
  readonly #retry: JetStreamRetryOptions;
  /** A watch's first consumer: its owner waits for it while starting (startUpRetry). */
  readonly #startRetry: JetStreamRetryOptions;
  /** Plain puts: published by this connection's publisher on the subject nats.js's put would use. */
  readonly #publisher: JetStreamPublisher;
  readonly #keys: KeySubjects;

  constructor(kv: KV, bucket: string, schema: S, rejecter: Rejecter, publisher: JetStreamPublisher, retry: JetStreamRetryOptions = {}) {
    this.#kv = kv;
    this.#keys = kv as unknown as KeySubjects;
    this.#bucket = bucket;
    this.#schema = schema;
    this.#rejecter = rejecter;
    this.#publisher = publisher;
    this.#retry = retry;
    this.#startRetry = startUpRetry(retry);
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
    // The key encoded, checked and made a subject as nats.js's own put does it (any domain or mirror prefix too).
    let subject: string;
    try {
      const encoded = this.#keys.encodeKey(key);
      this.#keys.validateKey(encoded);
      subject = this.#keys.subjectForKey(encoded, true);
    } catch (err) {
      return Promise.reject(err);
    }
    return retryJetStream(() => this.#publisher.publish(subject, data), this.#retry);
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
   * then each change. Invalid values are counted as rejected and skipped. The watch survives the loss of its
   * consumer's JetStream node (ResumingWatch): no change is lost or repeated.
   */
  async watch(opts: { key?: string; onChange: (change: KvChange<z.output<S>>) => void }): Promise<KvWatchHandle> {
    const watch = new ResumingWatch({
      open: (resumeFrom, starting) =>
        retryJetStream(
          async () =>
            (await this.#kv.watch({
              ...(opts.key ? { key: opts.key } : {}),
              ...(resumeFrom > 0 ? { resumeFromRevision: resumeFrom } : {}),
            })) as unknown as KvWatchIterator,
          // The bucket was opened before: "not found" here is a node that has not applied its creation yet.
          starting ? this.#startRetry : { ...this.#retry, alsoTransient: NOT_YET_VISIBLE },
        ),
      deliver: (e) => {
        if (e.operation !== 'PUT') return opts.onChange({ key: e.key, op: 'DEL', revision: e.revision });
        const value = this.#decode(e);
        if (value !== undefined) opts.onChange({ key: e.key, op: 'PUT', value, revision: e.revision });
      },
      onDeliverError: (e, err) => this.#rejecter.reject(`${this.#bucket}:${e.key}`, `watch handler failed: ${String(err)}`),
      // How far the watch's consumer is: what ends the initial replay (ResumingWatch.synced), also when nothing
      // matched the filter at all and no entry will come.
      progress: (iter, starting) =>
        retryJetStream(
          async () => {
            // nats.js keeps the watch's consumer on the iterator (`_data`, not in its public types): without it nothing
            // says when the replay is over, so fail loudly rather than report a watch synced that is not.
            if (iter._data === undefined) throw new Error('the nats.js KV watch does not expose its consumer (_data)');
            const info = await iter._data.info(false);
            return { pending: info.num_pending, sent: info.delivered?.consumer_seq ?? 0 };
            // A consumer just created may be unknown for a moment to a lagging node; later, "not found" means it is
            // gone and the watch's check replaces it.
          },
          starting ? this.#startRetry : this.#retry,
        ),
      onReconnect: (listener) => this.#rejecter.onReconnect?.(listener) ?? (() => undefined),
    });
    await watch.start();
    return { stop: () => watch.stop(), synced: watch.synced };
  }
}
