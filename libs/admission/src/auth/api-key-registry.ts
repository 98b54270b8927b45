import { LRUCache } from 'lru-cache';
import { compileModelMatcher, type Identity } from '../identity';
import { apiKeyId, fastKeyDigest, parseApiKeyHash, verifyApiKey, type ParsedHash } from './api-key-hash';
import type { ApiKeyEntry } from './api-key-file';

interface CompiledKey {
  readonly entry: ApiKeyEntry;
  readonly hash: ParsedHash;
  readonly identity: Identity;
}

/** What verifying a presented key gave: the identity, or that no enabled entry matches. */
export type KeyVerification = { ok: true; identity: Identity } | { ok: false };

/**
 * The set of valid API keys. Verification costs one scrypt per distinct key (tens of milliseconds); the outcome
 * is then remembered under the key's SHA-256 (never the key), so the request path does a hash and a map lookup.
 * Misses are remembered too, briefly, so a client hammering with a bad key does not pin the libuv pool.
 */
export class ApiKeyRegistry {
  #byId = new Map<string, CompiledKey>();
  #withoutId: CompiledKey[] = [];
  #verified: LRUCache<string, CompiledKey | false>;
  #inflight = new Map<string, Promise<CompiledKey | false>>();
  readonly #tierLabel: () => string;

  constructor(cacheSize: number, tierLabel: () => string) {
    this.#verified = new LRUCache({ max: cacheSize, ttl: 0 });
    this.#tierLabel = tierLabel;
  }

  get size(): number {
    return this.#byId.size + this.#withoutId.length;
  }

  /** Replaces every key (after a reload). Cached verifications are dropped: a removed key stops working at once. */
  replace(entries: readonly ApiKeyEntry[]): void {
    const byId = new Map<string, CompiledKey>();
    const withoutId: CompiledKey[] = [];
    for (const entry of entries) {
      if (entry.disabled) continue;
      const hash = parseApiKeyHash(entry.hash);
      if (!hash) continue; // the schema already rejected it; kept for type narrowing
      const compiled: CompiledKey = { entry, hash, identity: this.#identityOf(entry) };
      if (entry.id !== undefined) byId.set(entry.id, compiled);
      else withoutId.push(compiled);
    }
    this.#byId = byId;
    this.#withoutId = withoutId;
    this.#verified.clear();
    this.#inflight.clear();
  }

  #identityOf(entry: ApiKeyEntry): Identity {
    const tier = entry.labels[this.#tierLabel()];
    return {
      kind: 'api_key',
      id: `key:${entry.name}`,
      user: entry.tenant ?? entry.name,
      name: entry.name,
      labels: entry.labels,
      ...(entry.tenant !== undefined ? { tenant: entry.tenant } : {}),
      ...(tier !== undefined ? { tier } : {}),
      ...(entry.models !== undefined ? { models: compileModelMatcher(entry.models) } : {}),
    };
  }

  /** Cached outcome for `key` without any scrypt work, or undefined when it has not been verified yet. */
  cached(key: string): KeyVerification | undefined {
    const hit = this.#verified.get(fastKeyDigest(key));
    if (hit === undefined) return undefined;
    return hit === false ? { ok: false } : { ok: true, identity: hit.identity };
  }

  async verify(key: string): Promise<KeyVerification> {
    const digest = fastKeyDigest(key);
    const hit = this.#verified.get(digest);
    if (hit !== undefined) return hit === false ? { ok: false } : { ok: true, identity: hit.identity };
    // Concurrent first requests with the same key share one scrypt run.
    let pending = this.#inflight.get(digest);
    if (!pending) {
      pending = this.#lookup(key);
      this.#inflight.set(digest, pending);
    }
    const found = await pending;
    if (this.#inflight.get(digest) === pending) {
      this.#inflight.delete(digest);
      // Misses expire so a key added by a reload is not refused for long; hits live until the next reload.
      this.#verified.set(digest, found, found === false ? { ttl: 60_000 } : {});
    }
    return found === false ? { ok: false } : { ok: true, identity: found.identity };
  }

  async #lookup(key: string): Promise<CompiledKey | false> {
    const id = apiKeyId(key);
    const candidate = id !== undefined ? this.#byId.get(id) : undefined;
    if (candidate) return (await verifyApiKey(key, candidate.hash)) ? candidate : false;
    for (const c of this.#withoutId) {
      if (await verifyApiKey(key, c.hash)) return c;
    }
    return false;
  }
}
