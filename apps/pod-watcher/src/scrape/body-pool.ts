/** Buffers kept for reuse at most (a scrape's concurrency is in the hundreds; more are simply let go). */
const MAX_KEPT = 256;
/** Sizes are rounded up to this, so pages of slightly different sizes share buffers. */
const GRAIN = 16 * 1024;
/** Larger buffers are not kept (a rare huge answer should not stay in memory). */
const MAX_POOLED = 1024 * 1024;

/**
 * Reusable body buffers for scrape answers. A scrape reads ~26 KB and keeps a few numbers of it; allocating a new
 * buffer for each of thousands of pages a second made memory outside the V8 heap churn, and the collector ran to
 * free it. Here a body buffer goes back to the pool once the page was read.
 */
export class BodyPool {
  readonly #free: Buffer[] = [];

  /** A buffer of at least `size` bytes (its contents are not cleared). */
  take(size: number): Buffer {
    for (let i = this.#free.length - 1; i >= 0; i--) {
      const b = this.#free[i];
      if (b.length >= size) {
        this.#free[i] = this.#free[this.#free.length - 1];
        this.#free.pop();
        return b;
      }
    }
    return Buffer.allocUnsafeSlow(Math.ceil(Math.max(size, 1) / GRAIN) * GRAIN);
  }

  give(buf: Buffer): void {
    if (buf.length <= MAX_POOLED && this.#free.length < MAX_KEPT) this.#free.push(buf);
  }

  get size(): number {
    return this.#free.length;
  }
}
