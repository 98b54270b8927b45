import type { Redis, RedisOptions } from 'ioredis';
import type { AdmissionLogger } from '../logger';
import { BudgetRecordSchema, type BudgetRecord } from './budget-record';
import { LeaseMessageSchema, StoreUnavailableError, type BudgetStore, type LeaseMessage, type StoredRecord } from './budget-store';

/**
 * Compare-and-set on a hash {r: revision, d: record JSON}; also sets the key's expiry, which is how Redis
 * records of finished windows go away (no sweep needed).
 */
const CAS_SCRIPT = `
local cur = tonumber(redis.call('HGET', KEYS[1], 'r') or '0')
if cur ~= tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'r', cur + 1, 'd', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return cur + 1
`;

type CasClient = Redis & { triadCas(key: string, revision: number, data: string, ttlMs: number): Promise<number> };

/** `host:port` (Kthena's `rateLimit.global.redis.address`) or a `redis://[:password@]host:port[/db]` URL. */
export function redisOptionsFor(address: string): RedisOptions {
  if (address.startsWith('redis://') || address.startsWith('rediss://')) {
    const url = new URL(address);
    return {
      host: url.hostname,
      port: Number(url.port || 6379),
      ...(url.password ? { password: decodeURIComponent(url.password) } : {}),
      ...(url.username ? { username: decodeURIComponent(url.username) } : {}),
      ...(url.pathname.length > 1 ? { db: Number(url.pathname.slice(1)) } : {}),
      ...(url.protocol === 'rediss:' ? { tls: {} } : {}),
    };
  }
  const i = address.lastIndexOf(':');
  return i > 0 ? { host: address.slice(0, i), port: Number(address.slice(i + 1)) } : { host: address, port: 6379 };
}

/**
 * Budget records in Redis, same semantics as the NATS store: compare-and-set per scope (a Lua script),
 * lease messages over pub/sub on a second connection. Commands fail fast once a connection that was up drops.
 */
class RedisBudgetStore implements BudgetStore {
  readonly backend = 'redis';
  readonly #client: CasClient;
  readonly #subscriber: Redis;
  readonly #prefix: string;
  readonly #channel: string;
  readonly #handlers = new Set<(m: LeaseMessage) => void>();
  #everReady = false;
  #subscribed = false;

  constructor(address: string, opts: { keyPrefix: string; timeoutMs: number; logger: AdmissionLogger }) {
    const RedisCtor = (require('ioredis') as { Redis: new (o: RedisOptions) => Redis }).Redis;
    const base: RedisOptions = {
      ...redisOptionsFor(address),
      commandTimeout: opts.timeoutMs,
      maxRetriesPerRequest: 1,
      connectTimeout: Math.max(opts.timeoutMs, 1000),
      retryStrategy: (times) => Math.min(times * 100, 2000),
    };
    this.#client = new RedisCtor(base) as CasClient;
    this.#client.defineCommand('triadCas', { numberOfKeys: 1, lua: CAS_SCRIPT });
    this.#client.on('ready', () => (this.#everReady = true));
    this.#client.on('error', (err: Error) => opts.logger.debug({ address, error: err.message }, 'redis connection error'));
    this.#subscriber = new RedisCtor({ ...base, commandTimeout: undefined });
    this.#subscriber.on('error', () => undefined);
    this.#prefix = opts.keyPrefix;
    this.#channel = `${opts.keyPrefix}lease`;
    this.#subscriber.on('message', (channel: string, text: string) => {
      if (channel !== this.#channel) return;
      try {
        const parsed = LeaseMessageSchema.safeParse(JSON.parse(text));
        if (parsed.success) this.#handlers.forEach((h) => h(parsed.data));
      } catch {
        // Not ours or not JSON: ignore.
      }
    });
  }

  /** Before the first connection commands queue (bounded by the timeout); after it, only while connected. */
  get available(): boolean {
    const s = this.#client.status;
    return s === 'ready' || (!this.#everReady && (s === 'wait' || s === 'connecting' || s === 'connect'));
  }

  async #op<T>(what: string, fn: () => Promise<T>): Promise<T> {
    if (!this.available) throw new StoreUnavailableError(`redis is not connected (${what})`);
    try {
      return await fn();
    } catch (err) {
      throw new StoreUnavailableError(`redis ${what} failed: ${(err as Error).message}`, { cause: err });
    }
  }

  async read(key: string): Promise<StoredRecord> {
    const [rev, data] = await this.#op('read', () => this.#client.hmget(this.#prefix + key, 'r', 'd'));
    const revision = Number(rev ?? 0);
    if (!data) return { record: undefined, revision };
    const parsed = BudgetRecordSchema.safeParse(JSON.parse(data));
    return { record: parsed.success ? parsed.data : undefined, revision };
  }

  async write(key: string, record: BudgetRecord, revision: number): Promise<boolean> {
    // Kept for two more windows so the next one can read its carry, at least a minute.
    const ttlMs = Math.max(3 * record.unitMs, 60_000);
    const result = await this.#op('write', () => this.#client.triadCas(this.#prefix + key, revision, JSON.stringify(record), ttlMs));
    return Number(result) > 0;
  }

  publish(message: LeaseMessage): void {
    if (!this.available) return;
    this.#client.publish(this.#channel, JSON.stringify(message)).catch(() => undefined);
  }

  subscribe(handler: (message: LeaseMessage) => void): () => void {
    this.#handlers.add(handler);
    if (!this.#subscribed) {
      this.#subscribed = true;
      this.#subscriber.subscribe(this.#channel).catch(() => (this.#subscribed = false));
    }
    return () => this.#handlers.delete(handler);
  }

  async sweep(): Promise<number> {
    return 0; // keys expire by themselves
  }

  async close(): Promise<void> {
    this.#handlers.clear();
    this.#client.disconnect();
    this.#subscriber.disconnect();
  }
}

/** One store (two connections) per Redis address, shared by every scope that names that address. */
export class RedisStorePool {
  readonly #stores = new Map<string, RedisBudgetStore>();
  readonly #opts: { keyPrefix: string; timeoutMs: number; logger: AdmissionLogger };

  constructor(opts: { keyPrefix: string; timeoutMs: number; logger: AdmissionLogger }) {
    this.#opts = opts;
  }

  get(address: string): RedisBudgetStore {
    let store = this.#stores.get(address);
    if (!store) {
      store = new RedisBudgetStore(address, this.#opts);
      this.#stores.set(address, store);
    }
    return store;
  }

  get size(): number {
    return this.#stores.size;
  }

  async close(): Promise<void> {
    await Promise.all([...this.#stores.values()].map((s) => s.close()));
    this.#stores.clear();
  }
}
