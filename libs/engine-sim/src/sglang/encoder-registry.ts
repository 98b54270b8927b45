/** What the registry reports as it changes (counters and logs of the simulated engine). */
export interface RegistryEvents {
  registered?(url: string): void;
  unregistered?(url: string): void;
  evicted?(url: string): void;
  revived?(url: string): void;
  dropped?(url: string): void;
}

/** Consecutive failed probes before an encoder is evicted (SGLang's `_health_fail_threshold`). */
export const HEALTH_FAIL_THRESHOLD = 3;

/**
 * The encoder registry of a `--language-only` SGLang server (EncoderBootstrapServer): registered URLs, stored
 * verbatim, in registration order. Health probing evicts a URL after three consecutive failures and keeps probing
 * evicted URLs, which come back when healthy, until they have been evicted for `evictedTtlMs`. An explicit
 * unregister also forgets an evicted URL; a register clears its eviction.
 */
export class EncoderRegistry {
  readonly #urls: string[] = [];
  readonly #failures = new Map<string, number>();
  /** Evicted URL → eviction time (ms). */
  readonly #evicted = new Map<string, number>();

  constructor(
    initial: readonly string[] = [],
    private readonly events: RegistryEvents = {},
    private readonly evictedTtlMs = 600_000,
  ) {
    for (const url of initial) if (!this.#urls.includes(url)) this.#urls.push(url);
  }

  register(url: string): void {
    this.#failures.delete(url);
    this.#evicted.delete(url);
    if (!this.#urls.includes(url)) this.#urls.push(url);
    this.events.registered?.(url);
  }

  /** Removes a URL whether registered or evicted; absent URLs are fine (SGLang answers 200 either way). */
  unregister(url: string): void {
    const at = this.#urls.indexOf(url);
    if (at >= 0) this.#urls.splice(at, 1);
    this.#evicted.delete(url);
    this.#failures.delete(url);
    this.events.unregistered?.(url);
  }

  /** The URLs a request is spread over now (a snapshot: later changes do not affect a request in flight). */
  list(): readonly string[] {
    return this.#urls.slice();
  }

  evicted(): readonly string[] {
    return [...this.#evicted.keys()];
  }

  /** URLs one health round probes: registered ones and evicted ones not yet past their TTL (expired ones are dropped). */
  probeCandidates(now: number): string[] {
    if (this.evictedTtlMs > 0) {
      for (const [url, at] of this.#evicted) {
        if (now - at < this.evictedTtlMs) continue;
        this.#evicted.delete(url);
        this.#failures.delete(url);
        this.events.dropped?.(url);
      }
    }
    return [...new Set([...this.#urls, ...this.#evicted.keys()])];
  }

  /** Applies one probe result. URLs unregistered while their probe was in flight are ignored. */
  probed(url: string, healthy: boolean, now: number): void {
    const evictedAt = this.#evicted.get(url);
    if (evictedAt === undefined && !this.#urls.includes(url)) return;
    if (healthy) {
      this.#failures.delete(url);
      if (evictedAt !== undefined) {
        this.#evicted.delete(url);
        if (!this.#urls.includes(url)) this.#urls.push(url);
        this.events.revived?.(url);
      }
      return;
    }
    if (evictedAt !== undefined) return;
    const failures = (this.#failures.get(url) ?? 0) + 1;
    if (failures < HEALTH_FAIL_THRESHOLD) {
      this.#failures.set(url, failures);
      return;
    }
    this.#failures.delete(url);
    this.#urls.splice(this.#urls.indexOf(url), 1);
    this.#evicted.set(url, now);
    this.events.evicted?.(url);
  }
}
