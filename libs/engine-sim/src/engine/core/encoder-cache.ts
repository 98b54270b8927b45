/**
 * The encoder cache of a vLLM V1 engine, re-derived from `vllm/v1/core/encoder_cache_manager.py`: capacity is
 * counted in encoder embeddings (an image's placeholder tokens), entries are keyed by the item's identifier and
 * referenced by the requests using them; an entry no request references is "freeable" and stays cached until an
 * allocation needs its room, oldest freeable first.
 */
export class EncoderCache {
  readonly #refs = new Map<string, Set<string>>();
  /** Unreferenced entries in the order they became unreferenced (head = evicted first) → their size. */
  readonly #freeable = new Map<string, number>();
  #free: number;
  #freeableSlots: number;
  evictions = 0;

  constructor(readonly capacity: number) {
    this.#free = capacity;
    this.#freeableSlots = capacity;
  }

  /** Items cached (referenced or not). */
  get size(): number {
    return this.#refs.size;
  }

  has(id: string): boolean {
    return this.#refs.has(id);
  }

  /** `check_and_update_cache`: true when cached; the request then references the entry. */
  lookup(id: string, requestId: string, embeds: number): boolean {
    const refs = this.#refs.get(id);
    if (!refs) return false;
    if (refs.size === 0) {
      this.#freeable.delete(id);
      this.#freeableSlots -= embeds;
    }
    refs.add(requestId);
    return true;
  }

  /** `can_allocate`: whether `embeds` more (on top of `pending` already promised this step) fit, evicting if needed. */
  canAllocate(embeds: number, pending: number): boolean {
    const need = embeds + pending;
    if (need <= this.#free) return true;
    if (need > this.#freeableSlots) return false;
    while (need > this.#free) {
      const [id, size] = this.#freeable.entries().next().value as [string, number];
      this.#freeable.delete(id);
      this.#refs.delete(id);
      this.#free += size;
      this.evictions++;
    }
    return true;
  }

  /** `allocate`: reserves room for an item the request will encode (or load) in this step. */
  allocate(id: string, requestId: string, embeds: number): void {
    let refs = this.#refs.get(id);
    if (!refs) this.#refs.set(id, (refs = new Set()));
    refs.add(requestId);
    this.#free -= embeds;
    this.#freeableSlots -= embeds;
  }

  /**
   * One use of an item outside the step scheduler (an encoder-only instance): true on a hit; on a miss the item is
   * stored (evicting the oldest unreferenced entries) when it fits. Either way it is left unreferenced, newest last.
   */
  touch(id: string, embeds: number): boolean {
    const user = '\u0000encoder';
    const hit = this.lookup(id, user, embeds);
    if (!hit) {
      if (!this.canAllocate(embeds, 0)) return false;
      this.allocate(id, user, embeds);
    }
    this.release(id, user, embeds);
    return hit;
  }

  /** `free_encoder_input`: drops the request's reference; an unreferenced entry becomes freeable (newest last). */
  release(id: string, requestId: string, embeds: number): void {
    const refs = this.#refs.get(id);
    if (!refs || refs.size === 0 || !refs.delete(requestId)) return;
    if (refs.size === 0) {
      this.#freeable.set(id, embeds);
      this.#freeableSlots += embeds;
    }
  }
}
