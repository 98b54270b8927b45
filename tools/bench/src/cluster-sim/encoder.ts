import type { CostModel } from './cost-model';

/**
 * One simulated encoder-only pod (EPD's E), independent of any router: items are encoded one after another
 * (`encodeMsPerItem` each); an item still in its LRU cache of encoder outputs costs nothing. What it encoded is
 * handed to the consumer by the simulator (`ecTransferMsPerItem` per item).
 */
export class SimEncoder {
  readonly #cache = new Map<number, true>();
  #freeAt = 0;
  /** Completion times of the items accepted and not yet done (what the pod's queue metric shows). */
  readonly #pending: number[] = [];
  encoded = 0;
  hits = 0;

  constructor(
    readonly index: number,
    readonly cost: CostModel,
  ) {}

  /** Items queued or being encoded at `now`. */
  pending(now: number): number {
    let n = 0;
    for (const t of this.#pending) if (t > now) n++;
    return n;
  }

  /** Time the queue drains (what an oracle may read). */
  get freeAt(): number {
    return this.#freeAt;
  }

  holds(image: number): boolean {
    return this.#cache.has(image);
  }

  /** Encodes one item arriving at `now`: when its output is ready and whether the cache served it. */
  encode(image: number, now: number): { doneAt: number; hit: boolean } {
    if (this.#pending.length > 64) this.#pending.splice(0, this.#pending.length, ...this.#pending.filter((t) => t > now));
    if (this.#cache.delete(image)) {
      this.#cache.set(image, true);
      this.hits++;
      return { doneAt: now, hit: true };
    }
    const start = Math.max(now, this.#freeAt);
    this.#freeAt = start + this.cost.encodeMsPerItem;
    this.#pending.push(this.#freeAt);
    this.encoded++;
    this.#cache.set(image, true);
    if (this.#cache.size > this.cost.encoderPodCacheItems) this.#cache.delete(this.#cache.keys().next().value as number);
    return { doneAt: this.#freeAt, hit: false };
  }
}
