/**
 * The KV block pool of a vLLM V1 engine with prefix caching, re-derived from vLLM's `vllm/v1/core/block_pool.py`
 * and `kv_cache_manager.py` (docs/engine-sim.md, *Engine core*):
 *
 * - every block has a reference count; a block whose count drops to 0 goes to the tail of the free queue but keeps
 *   its hash, so a later request can still hit it ("cached free block");
 * - new blocks are taken from the head of the free queue (least recently freed first); taking a cached block
 *   evicts its hash (`_maybe_evict_cached_block`);
 * - a hit on a cached free block takes it out of the free queue (`touch`);
 * - a request's blocks are freed tail first, so the end of a prompt is evicted before its shared beginning;
 * - usage is `1 - free / total`, what `vllm:kv_cache_usage_perc` reports (cached free blocks count as free).
 *
 * With a {@link BlockPoolListener} (the engine publishes KV events) it reports what vLLM's pool queues as events:
 * each `cache_full_blocks` call's newly cached blocks as one stored run (per contiguous run here, with the parent
 * block's key), each `_maybe_evict_cached_block` as a removal, `reset_prefix_cache` as a clear. Only blocks whose
 * caller gave an engine key ({@link PublishedBlock}) are reported. Unlike vLLM this pool keeps one block per hash
 * (a duplicate is not cached), so a key is stored once and removed once.
 */
export class BlockPool {
  readonly #refs: Int32Array;
  readonly #hashOf: (number | undefined)[];
  readonly #publishedOf: (PublishedBlock | undefined)[];
  listener: BlockPoolListener | undefined;
  readonly #byHash = new Map<number, number>();
  /** Free block ids in eviction order (Map keeps insertion order: the head is the next to be reused). */
  readonly #free = new Map<number, true>();
  evictions = 0;

  constructor(readonly numBlocks: number) {
    this.#refs = new Int32Array(numBlocks);
    this.#hashOf = new Array<number | undefined>(numBlocks).fill(undefined);
    this.#publishedOf = new Array<PublishedBlock | undefined>(numBlocks).fill(undefined);
    for (let i = 0; i < numBlocks; i++) this.#free.set(i, true);
  }

  get freeBlocks(): number {
    return this.#free.size;
  }

  refCount(block: number): number {
    return this.#refs[block];
  }

  /** Share of the pool in use by running requests (0..1). */
  usage(): number {
    return this.numBlocks === 0 ? 0 : 1 - this.#free.size / this.numBlocks;
  }

  /** Blocks holding the longest cached prefix of `hashes` (in order; stops at the first miss). */
  cachedPrefix(hashes: readonly number[]): number[] {
    const out: number[] = [];
    for (const h of hashes) {
      const block = this.#byHash.get(h);
      if (block === undefined) break;
      out.push(block);
    }
    return out;
  }

  /** Takes a reference on blocks found in the cache (removing free ones from the free queue). */
  touch(blocks: readonly number[]): void {
    for (const b of blocks) {
      if (this.#refs[b] === 0) this.#free.delete(b);
      this.#refs[b] = this.#refs[b] + 1;
    }
  }

  /** `n` new blocks with a reference each, or undefined when fewer than `n` are free (nothing is taken then). */
  allocate(n: number): number[] | undefined {
    if (n > this.#free.size) return undefined;
    const out: number[] = [];
    for (let i = 0; i < n; i++) {
      const b = this.#free.keys().next().value as number;
      this.#free.delete(b);
      const h = this.#hashOf[b];
      if (h !== undefined) {
        if (this.#byHash.get(h) === b) this.#byHash.delete(h);
        this.#hashOf[b] = undefined;
        this.evictions++;
        const published = this.#publishedOf[b];
        this.#publishedOf[b] = undefined;
        if (published) this.listener?.removed(published);
      }
      this.#refs[b] = 1;
      out.push(b);
    }
    return out;
  }

  /** Registers a full block's hash (first writer wins: one block per hash). Returns whether it is newly cached. */
  cache(block: number, hash: number, published?: PublishedBlock): boolean {
    if (this.#hashOf[block] !== undefined || this.#byHash.has(hash)) return false;
    this.#hashOf[block] = hash;
    this.#byHash.set(hash, block);
    this.#publishedOf[block] = published;
    return true;
  }

  /**
   * `cache_full_blocks` for a request's first `full` blocks: caches those not cached yet and reports each contiguous
   * run of newly cached blocks that have engine keys as one stored event, chained to the block before the run.
   */
  cacheFull(blocks: readonly number[], hashes: readonly number[], published: readonly PublishedBlock[] | undefined, full: number): void {
    let run: PublishedBlock[] = [];
    let parent: PublishedBlock | undefined;
    const flush = () => {
      if (run.length > 0) this.listener?.stored(run, parent);
      run = [];
    };
    for (let b = 0; b < full; b++) {
      const key = published?.[b];
      if (this.cache(blocks[b], hashes[b], key) && key) {
        if (run.length === 0) parent = published?.[b - 1];
        run.push(key);
      } else {
        flush();
      }
    }
    flush();
  }

  /** Drops one reference per block, tail first; blocks left without references join the free queue's tail. */
  free(blocks: readonly number[]): void {
    for (let i = blocks.length - 1; i >= 0; i--) {
      const b = blocks[i];
      const left = this.#refs[b] - 1;
      this.#refs[b] = left;
      if (left === 0) this.#free.set(b, true);
    }
  }

  /** Forgets every cached hash (`/reset_prefix_cache`); blocks in use stay allocated. */
  resetPrefixCache(): void {
    this.#byHash.clear();
    this.#hashOf.fill(undefined);
    this.#publishedOf.fill(undefined);
    this.listener?.cleared();
  }
}

/** A block as the engine names it in its KV events: the hash on the wire and the block's token ids. */
export interface PublishedBlock {
  readonly wire: Uint8Array | bigint;
  readonly tokens: readonly number[];
}

/** Where a pool's cache changes go when the engine publishes KV events. */
export interface BlockPoolListener {
  /** Blocks newly cached, in order; `parent` is the block before the first (undefined for the prompt's start). */
  stored(blocks: readonly PublishedBlock[], parent: PublishedBlock | undefined): void;
  removed(block: PublishedBlock): void;
  cleared(): void;
}
