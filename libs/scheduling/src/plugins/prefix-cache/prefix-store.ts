/**
 * Which endpoints have recently been sent which prompt-prefix block hashes, per model. Each endpoint keeps at most
 * `capacity` (model, hash) entries in LRU order; evicting one also removes the endpoint from that hash's owner set,
 * so the owner sets never reference forgotten entries. Maps keep insertion order, which makes them the LRU list.
 */
export class PrefixStore {
  readonly #capacity: number;
  /** model → hash → endpoint keys that hold it. */
  readonly #owners = new Map<string, Map<string, Set<string>>>();
  /** endpoint key → its entries (`model\n hash`), least recently used first. */
  readonly #perEndpoint = new Map<string, Map<string, true>>();

  constructor(capacity: number) {
    this.#capacity = capacity;
  }

  /** Endpoints holding `hash` of `model` (do not mutate). */
  owners(model: string, hash: string): ReadonlySet<string> | undefined {
    return this.#owners.get(model)?.get(hash);
  }

  /** Records that `endpoint` now holds these hashes (refreshing ones it already had). */
  insert(model: string, hashes: readonly string[], endpoint: string): void {
    let lru = this.#perEndpoint.get(endpoint);
    if (!lru) {
      lru = new Map();
      this.#perEndpoint.set(endpoint, lru);
    }
    let byHash = this.#owners.get(model);
    if (!byHash) {
      byHash = new Map();
      this.#owners.set(model, byHash);
    }
    for (const hash of hashes) {
      const entry = `${model}\n${hash}`;
      if (lru.delete(entry)) {
        lru.set(entry, true);
        continue;
      }
      lru.set(entry, true);
      let set = byHash.get(hash);
      if (!set) {
        set = new Set();
        byHash.set(hash, set);
      }
      set.add(endpoint);
      if (lru.size > this.#capacity) this.#evictOldest(lru, endpoint);
    }
  }

  /** Forgets everything about an endpoint (it left the index). */
  removeEndpoint(endpoint: string): void {
    const lru = this.#perEndpoint.get(endpoint);
    if (!lru) return;
    for (const entry of lru.keys()) this.#unown(entry, endpoint);
    this.#perEndpoint.delete(endpoint);
  }

  /** Number of entries held for an endpoint (tests, metrics). */
  sizeOf(endpoint: string): number {
    return this.#perEndpoint.get(endpoint)?.size ?? 0;
  }

  #evictOldest(lru: Map<string, true>, endpoint: string): void {
    const oldest = lru.keys().next().value as string;
    lru.delete(oldest);
    this.#unown(oldest, endpoint);
  }

  #unown(entry: string, endpoint: string): void {
    const nl = entry.indexOf('\n');
    const model = entry.slice(0, nl);
    const hash = entry.slice(nl + 1);
    const byHash = this.#owners.get(model);
    const set = byHash?.get(hash);
    if (!byHash || !set) return;
    set.delete(endpoint);
    if (set.size === 0) byHash.delete(hash);
    if (byHash.size === 0) this.#owners.delete(model);
  }
}
