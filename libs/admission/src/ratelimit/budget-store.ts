import { z } from 'zod';
import type { BudgetRecord } from './budget-record';

/** A record as read, with the revision a compare-and-set must name (0: the key does not exist). */
export interface StoredRecord {
  readonly record: BudgetRecord | undefined;
  readonly revision: number;
}

/** Lease coordination between replicas: "give back your lease of `key`" and "I gave it back". */
export const LeaseMessageSchema = z.object({
  t: z.enum(['reclaim', 'released']),
  key: z.string(),
  window: z.number().int(),
  from: z.string(),
});
export type LeaseMessage = z.infer<typeof LeaseMessageSchema>;

/**
 * Where scope records live and how replicas signal each other: NATS JetStream KV (default), Redis (for
 * `rateLimit.global.redis`), or process memory (single replica, tests). Operations throw
 * {@link StoreUnavailableError} when the backend cannot be reached, quickly when it is known to be down.
 */
export interface BudgetStore {
  /** `nats`, `redis` or `memory`: the `backend` metric label. */
  readonly backend: string;
  /** False while the backend is known to be unreachable. */
  readonly available: boolean;
  read(key: string): Promise<StoredRecord>;
  /** Compare-and-set: writes only when the key is still at `revision` (0: absent). False when it lost the race. */
  write(key: string, record: BudgetRecord, revision: number): Promise<boolean>;
  publish(message: LeaseMessage): void;
  /** Receives every lease message from every replica (including this one). Returns an unsubscribe function. */
  subscribe(handler: (message: LeaseMessage) => void): () => void;
  /** Removes records of windows that can no longer matter; returns how many. */
  sweep(now: number): Promise<number>;
  close(): Promise<void>;
}

export class StoreUnavailableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'StoreUnavailableError';
  }
}

/** A record is stale once its window and the next one are over: no carry or lease report can touch it. */
export function isStale(record: BudgetRecord, now: number): boolean {
  return Math.floor(now / record.unitMs) > record.window + 1;
}

/** Runs a pure read-modify-write step until its compare-and-set wins (or the step decides not to write). */
export async function transact<T>(
  store: BudgetStore,
  key: string,
  step: (record: BudgetRecord | undefined) => { record: BudgetRecord; write: boolean; result: T },
  maxAttempts = 100,
): Promise<T> {
  for (let attempt = 0; attempt < maxAttempts; attempt++) {
    const current = await store.read(key);
    const out = step(current.record);
    if (!out.write) return out.result;
    if (await store.write(key, out.record, current.revision)) return out.result;
  }
  throw new StoreUnavailableError(`budget record ${key}: compare-and-set lost ${maxAttempts} times in a row`);
}

interface MemorySpace {
  readonly records: Map<string, { record: BudgetRecord; revision: number }>;
  readonly handlers: Set<(m: LeaseMessage) => void>;
  revision: number;
}

/**
 * Budget records in process memory: one gateway replica, tests and benchmarks. Stores built over the same
 * `space` share records and messages, like replicas sharing a NATS bucket.
 */
export class MemoryBudgetStore implements BudgetStore {
  readonly backend = 'memory';
  available = true;
  readonly #space: MemorySpace;

  constructor(space?: MemoryBudgetStore) {
    this.#space = space ? space.#space : { records: new Map(), handlers: new Set(), revision: 0 };
  }

  #check(): void {
    if (!this.available) throw new StoreUnavailableError('memory store switched off');
  }

  async read(key: string): Promise<StoredRecord> {
    this.#check();
    const hit = this.#space.records.get(key);
    return hit ? { record: hit.record, revision: hit.revision } : { record: undefined, revision: 0 };
  }

  async write(key: string, record: BudgetRecord, revision: number): Promise<boolean> {
    this.#check();
    const hit = this.#space.records.get(key);
    if ((hit?.revision ?? 0) !== revision) return false;
    this.#space.records.set(key, { record, revision: ++this.#space.revision });
    return true;
  }

  publish(message: LeaseMessage): void {
    if (!this.available) return;
    // Delivered on a later turn, as a network message would be.
    queueMicrotask(() => this.#space.handlers.forEach((h) => h(message)));
  }

  subscribe(handler: (message: LeaseMessage) => void): () => void {
    this.#space.handlers.add(handler);
    return () => this.#space.handlers.delete(handler);
  }

  async sweep(now: number): Promise<number> {
    let n = 0;
    for (const [key, { record }] of this.#space.records) {
      if (isStale(record, now)) {
        this.#space.records.delete(key);
        n++;
      }
    }
    return n;
  }

  async close(): Promise<void> {
    return undefined;
  }
}
