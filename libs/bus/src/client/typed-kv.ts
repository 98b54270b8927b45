import type { KV, KvEntry } from '@nats-io/kv';
import type { z } from 'zod';
import { decodeMessage, encodeMessage } from '../codec';

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
}

/** A JetStream KV bucket whose values are validated against a zod schema on every read. */
export class TypedKv<S extends z.ZodType> {
  readonly #kv: KV;
  readonly #bucket: string;
  readonly #schema: S;
  readonly #rejecter: Rejecter;

  constructor(kv: KV, bucket: string, schema: S, rejecter: Rejecter) {
    this.#kv = kv;
    this.#bucket = bucket;
    this.#schema = schema;
    this.#rejecter = rejecter;
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

  put(key: string, value: z.input<S>): Promise<number> {
    return this.#kv.put(key, encodeMessage(this.#schema, value));
  }

  /** Writes only when the key does not exist; rejects otherwise. */
  create(key: string, value: z.input<S>): Promise<number> {
    return this.#kv.create(key, encodeMessage(this.#schema, value));
  }

  /** Compare-and-set: writes only when the key is still at `revision`; rejects otherwise. */
  update(key: string, value: z.input<S>, revision: number): Promise<number> {
    return this.#kv.update(key, encodeMessage(this.#schema, value), revision);
  }

  async getEntry(key: string): Promise<{ value: z.output<S>; revision: number } | undefined> {
    const entry = await this.#kv.get(key);
    if (!entry || entry.operation !== 'PUT') return undefined;
    const value = this.#decode(entry);
    return value === undefined ? undefined : { value, revision: entry.revision };
  }

  async get(key: string): Promise<z.output<S> | undefined> {
    return (await this.getEntry(key))?.value;
  }

  async delete(key: string): Promise<void> {
    await this.#kv.delete(key);
  }

  async keys(filter?: string): Promise<string[]> {
    const out: string[] = [];
    for await (const k of await this.#kv.keys(filter)) out.push(k);
    return out;
  }

  /**
   * Follows the bucket (or keys matching `key`, NATS wildcards allowed): first the current value of every key,
   * then each change. Invalid values are counted as rejected and skipped.
   */
  async watch(opts: { key?: string; onChange: (change: KvChange<z.output<S>>) => void }): Promise<KvWatchHandle> {
    const iter = await this.#kv.watch(opts.key ? { key: opts.key } : {});
    let markSynced: () => void = () => undefined;
    const synced = new Promise<void>((resolve) => {
      markSynced = resolve;
    });
    // The replay ends at the entry with nothing pending after it. When nothing matched the filter at all, no
    // entry will say so: the watcher's consumer info (cached by nats.js when it created the watch) tells.
    const consumer = (iter as unknown as { _data?: { info(cached: boolean): Promise<{ num_pending: number }> } })._data;
    const pending = consumer ? (await consumer.info(true)).num_pending : (await this.#kv.status()).values;
    if (pending === 0) markSynced();
    void (async () => {
      for await (const e of iter) {
        if (e.operation === 'PUT') {
          const value = this.#decode(e);
          if (value !== undefined) opts.onChange({ key: e.key, op: 'PUT', value, revision: e.revision });
        } else {
          opts.onChange({ key: e.key, op: 'DEL', revision: e.revision });
        }
        if (e.delta === 0 || e.isUpdate) markSynced();
      }
    })();
    return { stop: () => iter.stop(), synced };
  }
}
