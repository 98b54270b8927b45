/** What a prefill leaves for the decode of the same room: the prompt it computed (the KV a decode would fetch). */
export interface RoomEntry {
  readonly room: string;
  readonly promptTokens: number;
  readonly expiresAt: number;
}

type Waiter = (entry: RoomEntry | undefined) => void;

/**
 * Rooms a SGLang prefill has computed, keyed by exact decimal room text. A decode may ask before the prefill is
 * done (they are called concurrently), so waiters are parked until the room appears or their deadline passes.
 */
export class RoomRegistry {
  readonly #rooms = new Map<string, RoomEntry>();
  readonly #waiters = new Map<string, Set<Waiter>>();
  readonly #timers = new Set<NodeJS.Timeout>();

  constructor(readonly leaseMs: number) {}

  register(room: string, promptTokens: number): void {
    this.#expire();
    const entry: RoomEntry = { room, promptTokens, expiresAt: Date.now() + this.leaseMs };
    const waiters = this.#waiters.get(room);
    if (waiters && waiters.size > 0) {
      // Handed straight to the waiting decode: the KV is consumed.
      this.#waiters.delete(room);
      for (const w of waiters) w(entry);
      return;
    }
    this.#rooms.delete(room);
    this.#rooms.set(room, entry);
  }

  /** Calls `done` with the entry once the room is registered, or with undefined after `timeoutMs`. Returns a canceller. */
  wait(room: string, timeoutMs: number, done: Waiter): () => void {
    this.#expire();
    const entry = this.#rooms.get(room);
    if (entry) {
      this.#rooms.delete(room);
      done(entry);
      return () => {};
    }
    let set = this.#waiters.get(room);
    if (!set) this.#waiters.set(room, (set = new Set()));
    const waiters = set;
    const timer = setTimeout(() => {
      this.#timers.delete(timer);
      waiters.delete(waiter);
      if (waiters.size === 0) this.#waiters.delete(room);
      done(undefined);
    }, timeoutMs);
    this.#timers.add(timer);
    const waiter: Waiter = (e) => {
      clearTimeout(timer);
      this.#timers.delete(timer);
      done(e);
    };
    waiters.add(waiter);
    return () => {
      clearTimeout(timer);
      this.#timers.delete(timer);
      waiters.delete(waiter);
      if (waiters.size === 0) this.#waiters.delete(room);
    };
  }

  /** Drops every waiter and its timer (server shutdown). */
  close(): void {
    for (const t of this.#timers) clearTimeout(t);
    this.#timers.clear();
    this.#waiters.clear();
    this.#rooms.clear();
  }

  get size(): number {
    return this.#rooms.size;
  }

  #expire(): void {
    const now = Date.now();
    for (const [room, entry] of this.#rooms) {
      if (entry.expiresAt > now) break;
      this.#rooms.delete(room);
    }
  }
}
