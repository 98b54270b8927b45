import type { LoggedRequest } from './options';

/**
 * The requests a simulator received, newest last, as a bounded ring so a long benchmark does not grow memory.
 * Entries keep references to the parsed body (no copy) because building them is on the hot path.
 */
export class RequestLog {
  readonly #limit: number;
  #entries: LoggedRequest[] = [];
  #start = 0;

  constructor(limit: number) {
    this.#limit = Math.max(0, Math.floor(limit));
  }

  /** False when the log keeps nothing (limit 0): callers can skip building entries. */
  get enabled(): boolean {
    return this.#limit > 0;
  }

  add(entry: LoggedRequest): void {
    if (this.#limit === 0) return;
    if (this.#entries.length < this.#limit) {
      this.#entries.push(entry);
      return;
    }
    this.#entries[this.#start] = entry;
    this.#start = (this.#start + 1) % this.#limit;
  }

  list(): readonly LoggedRequest[] {
    if (this.#start === 0) return this.#entries.slice();
    return [...this.#entries.slice(this.#start), ...this.#entries.slice(0, this.#start)];
  }

  clear(): void {
    this.#entries = [];
    this.#start = 0;
  }
}
