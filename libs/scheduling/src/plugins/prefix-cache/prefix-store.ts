/**
 * Which endpoints have recently been sent which prompt-prefix block hashes, per model. Each (endpoint, model) keeps
 * at most `capacity` hashes in LRU order; evicting one also removes the endpoint from that hash's owner set, so the
 * owner sets never reference forgotten entries. Maps keep insertion order, which makes them the LRU list.
 * (Kthena bounds each pod's LRU over all models together; per model is the same for the usual one-model pod and
 * avoids building a composite key per hash on the hot path. Not `lru-cache`: it allocates its index for `max`
 * entries up front, and there is one of these per endpoint and model, most far from full.)
 */
export class PrefixStore {
  readonly #capacity: number;
  /** model → hash → endpoint keys that hold it. */
  readonly #owners = new Map<string, Map<string, Set<string>>>();
  /** endpoint key → model → its hashes, least recently used first. */
  readonly #perEndpoint = new Map<string, Map<string, Map<string, true>>>();

  constructor(capacity: number) {
    this.#capacity = capacity;
  }

  /** Endpoints holding `hash` of `model` (do not mutate). */
  owners(model: string, hash: string): ReadonlySet<string> | undefined {
    return this.#owners.get(model)?.get(hash);
  }

  /** Records that `endpoint` now holds these hashes (refreshing ones it already had). */
  insert(model: string, hashes: readonly string[], endpoint: string): void {
    let models = this.#perEndpoint.get(endpoint);
    if (!models) {
      models = new Map();
      this.#perEndpoint.set(endpoint, models);
    }
    let lru = models.get(model);
    if (!lru) {
      lru = new Map();
      models.set(model, lru);
    }
    let byHash = this.#owners.get(model);
    if (!byHash) {
      byHash = new Map();
      this.#owners.set(model, byHash);
    }
    for (const hash of hashes) {
      if (lru.delete(hash)) {
        lru.set(hash, true);
        continue;
      }
      lru.set(hash, true);
      let set = byHash.get(hash);
      if (!set) {
        set = new Set();
        byHash.set(hash, set);
      }
      set.add(endpoint);
      if (lru.size > this.#capacity) {
        const oldest = lru.keys().next().value as string;
        lru.delete(oldest);
        this.#unown(model, oldest, endpoint);
      }
    }
  }

  /** Forgets everything about an endpoint (it left the index). */
  removeEndpoint(endpoint: string): void {
    const models = this.#perEndpoint.get(endpoint);
    if (!models) return;
    for (const [model, lru] of models) for (const hash of lru.keys()) this.#unown(model, hash, endpoint);
    this.#perEndpoint.delete(endpoint);
  }

  /** Number of hashes held for an endpoint across models (tests, metrics). */
  sizeOf(endpoint: string): number {
    let n = 0;
    for (const lru of this.#perEndpoint.get(endpoint)?.values() ?? []) n += lru.size;
    return n;
  }

  #unown(model: string, hash: string, endpoint: string): void {
    const byHash = this.#owners.get(model);
    const set = byHash?.get(hash);
    if (!byHash || !set) return;
    set.delete(endpoint);
    if (set.size === 0) byHash.delete(hash);
    if (byHash.size === 0) this.#owners.delete(model);
  }
}
