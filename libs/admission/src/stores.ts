import type { Bus } from '@triad/bus/client';
import type { RateLimitConfig } from './config/admission-config';
import type { AdmissionLogger } from './logger';
import { MemoryBudgetStore, type BudgetStore } from './ratelimit/budget-store';
import { NatsBudgetStore } from './ratelimit/nats-budget-store';
import { RedisStorePool } from './ratelimit/redis-budget-store';
import type { StoreResolver } from './ratelimit/scopes';

/**
 * The budget stores of one admission instance: the default store (NATS KV when a bus is given, as `auto`
 * resolves; or what `rateLimit.store` names) and a pool of Redis stores for routes with `global.redis`.
 * Store settings are read once: changing them needs a restart (a reload logs that and keeps the old stores).
 */
export class AdmissionStores implements StoreResolver {
  readonly defaultStore: BudgetStore;
  readonly #routePool: RedisStorePool;
  readonly #ownPool: RedisStorePool | undefined;
  readonly #ownsDefault: boolean;

  constructor(config: RateLimitConfig, deps: { bus?: Bus; store?: BudgetStore; logger: AdmissionLogger }) {
    const { store } = config;
    const timeoutMs = config.storeTimeout;
    this.#routePool = new RedisStorePool({ keyPrefix: config.redisKeyPrefix, timeoutMs, logger: deps.logger });
    this.#ownsDefault = deps.store === undefined;
    if (deps.store) {
      this.defaultStore = deps.store;
    } else if (store.type === 'redis') {
      this.#ownPool = new RedisStorePool({ keyPrefix: store.keyPrefix, timeoutMs, logger: deps.logger });
      this.defaultStore = this.#ownPool.get(store.address);
    } else if (store.type === 'nats' || (store.type === 'auto' && deps.bus)) {
      if (!deps.bus) throw new Error('rateLimit.store.type nats needs a NATS connection (deps.bus)');
      this.defaultStore = new NatsBudgetStore(deps.bus, {
        ...(store.type === 'nats' ? { bucket: store.bucket } : {}),
        timeoutMs,
        logger: deps.logger,
      });
    } else {
      this.defaultStore = new MemoryBudgetStore();
    }
  }

  redis(address: string): BudgetStore {
    return this.#routePool.get(address);
  }

  async close(): Promise<void> {
    await this.#routePool.close();
    await this.#ownPool?.close();
    if (this.#ownsDefault) await this.defaultStore.close();
  }
}
