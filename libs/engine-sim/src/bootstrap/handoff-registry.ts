import { BLOCK_TOKENS } from '../engine/prefix-cache';
import type { HeldKv } from '../metrics/engine-metrics';

/** What a prefill leaves for its decode: the prompt it computed (the KV a decode would fetch). */
export interface HandoffEntry {
  readonly key: string;
  readonly promptTokens: number;
  readonly expiresAt: number;
}

type Waiter = (entry: HandoffEntry | undefined) => void;

/**
 * Prefills a prefill has computed for a decode that runs concurrently (SGLang rooms, vLLM Mooncake transfer ids),
 * keyed by exact text. A decode may ask before the prefill is done, so waiters are parked until the key appears or
 * their deadline passes. Leases are equal, so the Map's insertion order is expiry order.
 */
export class HandoffRegistry {
  readonly #entries = new Map<string, HandoffEntry>();
  readonly #waiters = new Map<string, Set<Waiter>>();
  readonly #timers = new Set<NodeJS.Timeout>();

  constructor(readonly leaseMs: number) {}

  register(key: string, promptTokens: number): void {
    this.#expire();
    const entry: HandoffEntry = { key, promptTokens, expiresAt: Date.now() + this.leaseMs };
    const waiters = this.#waiters.get(key);
    if (waiters && waiters.size > 0) {
      // Handed straight to the waiting decode: the KV is consumed.
      this.#waiters.delete(key);
      for (const w of waiters) w(entry);
      return;
    }
    this.#entries.delete(key);
    this.#entries.set(key, entry);
  }

  /** Calls `done` with the entry once `key` is registered, or with undefined after `timeoutMs`. Returns a canceller. */
  wait(key: string, timeoutMs: number, done: Waiter): () => void {
    this.#expire();
    const entry = this.#entries.get(key);
    if (entry) {
      this.#entries.delete(key);
      done(entry);
      return () => {};
    }
    let set = this.#waiters.get(key);
    if (!set) this.#waiters.set(key, (set = new Set()));
    const waiters = set;
    const forget = () => {
      clearTimeout(timer);
      this.#timers.delete(timer);
      waiters.delete(waiter);
      if (waiters.size === 0 && this.#waiters.get(key) === waiters) this.#waiters.delete(key);
    };
    const timer = setTimeout(() => {
      forget();
      done(undefined);
    }, timeoutMs);
    this.#timers.add(timer);
    const waiter: Waiter = (e) => {
      forget();
      done(e);
    };
    waiters.add(waiter);
    return forget;
  }

  /** Drops every entry, waiter and timer (server shutdown). */
  close(): void {
    for (const t of this.#timers) clearTimeout(t);
    this.#timers.clear();
    this.#waiters.clear();
    this.#entries.clear();
  }

  get size(): number {
    return this.#entries.size;
  }

  /** Entries whose key starts with `prefix` that no decode has taken yet, with their blocks (expired ones dropped). */
  held(prefix: string): HeldKv {
    this.#expire();
    let requests = 0;
    let blocks = 0;
    for (const [key, entry] of this.#entries) {
      if (!key.startsWith(prefix)) continue;
      requests += 1;
      blocks += Math.max(1, Math.ceil(entry.promptTokens / BLOCK_TOKENS));
    }
    return { requests, blocks };
  }

  #expire(): void {
    const now = Date.now();
    for (const [key, entry] of this.#entries) {
      if (entry.expiresAt > now) break;
      this.#entries.delete(key);
    }
  }
}
