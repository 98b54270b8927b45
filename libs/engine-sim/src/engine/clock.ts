/** Timers of one simulated engine, so `close()` can cancel every pending simulated delay. */
export class SimClock {
  readonly #timers = new Map<NodeJS.Timeout, () => void>();

  /** Resolves after `ms`, or at once when the clock is stopped. */
  sleep(ms: number): Promise<void> {
    if (ms <= 0) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        this.#timers.delete(timer);
        resolve();
      }, ms);
      this.#timers.set(timer, resolve);
    });
  }

  stop(): void {
    for (const [timer, resolve] of this.#timers) {
      clearTimeout(timer);
      resolve();
    }
    this.#timers.clear();
  }
}

/** Yields to the event loop once (lets other connections run between batches of streamed tokens). */
export function nextTurn(): Promise<void> {
  return new Promise<void>((resolve) => setImmediate(resolve));
}
