import { decodeStepMs, type CostModel } from './cost-model';
import { blockKeys, type SimRequest } from './workload';

/** What a simulated engine did with one request. */
export interface Served {
  readonly request: SimRequest;
  readonly engine: number;
  /** Time the engine admitted the request (a running slot and KV room), ms. */
  admittedAt: number;
  firstTokenAt: number;
  finishedAt: number;
  /** Prompt tokens served from the prefix cache. */
  hitTokens: number;
  /** Media items not encoded (prefix or encoder-cache hit). */
  encoderHits: number;
}

/** Block events as an engine's KV-event stream would publish them (for a precise-prefix index). */
export interface CacheListener {
  stored(engine: number, keys: readonly number[]): void;
  removed(engine: number, keys: readonly number[]): void;
}

interface Waiting {
  readonly request: SimRequest;
  readonly keys: number[];
  readonly onFirstToken: (s: Served) => void;
  readonly onFinish: (s: Served) => void;
}

/**
 * One simulated engine (vLLM-like), independent of any router: a FIFO queue, at most `maxRunning` requests
 * running, a KV pool of blocks with automatic prefix caching (running requests pin their blocks; finished ones stay
 * cached, least recently used evicted first), an LRU encoder cache, and one prefill at a time (prefill is
 * compute-bound: requests' prefills queue behind each other). Decode runs the batch concurrently, each step slower
 * the fuller the batch. `schedule` is the simulator's clock.
 */
export class SimEngine {
  /** Block key → true, least recently used first (resident blocks, pinned or not). */
  readonly #lru = new Map<number, true>();
  readonly #pins = new Map<number, number>();
  #pinned = 0;
  /** Blocks reserved for running requests' outputs. */
  #reserved = 0;
  readonly #capacity: number;
  readonly #encoder = new Map<number, true>();
  readonly #queue: Waiting[] = [];
  running = 0;
  #prefillFreeAt = 0;
  /** Served requests' counters (what /metrics would show). */
  served = 0;
  busyMs = 0;
  /** TTFTs and TPOTs observed since the last scrape (the pod-watcher's interval means). */
  ttftSum = 0;
  ttftCount = 0;
  tpotSum = 0;
  tpotCount = 0;

  constructor(
    readonly index: number,
    readonly cost: CostModel,
    readonly schedule: (at: number, fn: () => void) => void,
    readonly listener?: CacheListener,
  ) {
    this.#capacity = Math.floor(cost.kvCapacityTokens / cost.blockTokens);
  }

  get waiting(): number {
    return this.#queue.length;
  }

  /** Share of the KV pool pinned by running requests (vLLM's kv_cache_usage_perc). */
  get kvUsage(): number {
    return Math.min(1, (this.#pinned + this.#reserved) / this.#capacity);
  }

  /** Time the prefill queue drains (what an oracle may read). */
  get prefillFreeAt(): number {
    return this.#prefillFreeAt;
  }

  /** Prompt tokens of `keys` this engine holds now (longest cached prefix). */
  cachedPrefixTokens(keys: readonly number[]): number {
    let n = 0;
    while (n < keys.length && this.#lru.has(keys[n] as number)) n++;
    return n * this.cost.blockTokens;
  }

  hasEncoded(image: number): boolean {
    return this.#encoder.has(image);
  }

  /** Prefill cost of a request here and now (encode + uncached tokens), ms: what an oracle minimises. */
  prefillCostMs(request: SimRequest, keys: readonly number[]): number {
    const hit = this.cachedPrefixTokens(keys);
    return this.#prefillMs(request, hit, this.#encodes(request, hit));
  }

  submit(request: SimRequest, now: number, onFirstToken: (s: Served) => void, onFinish: (s: Served) => void, keys?: number[]): void {
    this.#queue.push({ request, keys: keys ?? blockKeys(request.segments, this.cost.blockTokens), onFirstToken, onFinish });
    this.#admit(now);
  }

  #encodes(request: SimRequest, hitTokens: number): number {
    // Images inside the cached prefix need no encoding; the others are encoded unless the encoder cache has them.
    let pos = 0, n = 0;
    for (const s of request.segments) {
      if (s.image !== undefined && pos + s.tokens > hitTokens && !this.#encoder.has(s.image)) n++;
      pos += s.tokens;
    }
    return n;
  }

  #prefillMs(request: SimRequest, hitTokens: number, encodes: number): number {
    const c = this.cost;
    return c.prefillOverheadMs + encodes * c.encodeMsPerItem + ((request.promptTokens - hitTokens) / 1000) * c.prefillMsPer1kTokens;
  }

  #admit(now: number): void {
    const c = this.cost;
    while (this.#queue.length > 0 && this.running < c.maxRunning) {
      const w = this.#queue[0] as Waiting;
      const outBlocks = Math.ceil(w.request.outputTokens / c.blockTokens);
      let fresh = 0;
      for (const k of w.keys) if (!this.#lru.has(k)) fresh++;
      let unpinnedNeeded = 0;
      for (const k of w.keys) if (this.#lru.has(k) && !this.#pins.has(k)) unpinnedNeeded++;
      // Room: pinned + reserved + this request's blocks must fit (a request larger than the pool runs alone).
      const need = this.#pinned + this.#reserved + fresh + unpinnedNeeded + outBlocks;
      if (need > this.#capacity && this.running > 0) break;
      this.#queue.shift();
      this.#start(w, now, outBlocks);
    }
  }

  #start(w: Waiting, now: number, outBlocks: number): void {
    const c = this.cost;
    const hitTokens = Math.min(this.cachedPrefixTokens(w.keys), w.request.promptTokens);
    const encodes = this.#encodes(w.request, hitTokens);
    const stored: number[] = [];
    for (const k of w.keys) {
      if (this.#lru.delete(k)) this.#lru.set(k, true);
      else {
        this.#lru.set(k, true);
        stored.push(k);
      }
      const p = this.#pins.get(k) ?? 0;
      if (p === 0) this.#pinned++;
      this.#pins.set(k, p + 1);
    }
    this.#reserved += outBlocks;
    this.#evict();
    if (stored.length > 0) this.listener?.stored(this.index, stored);
    let pos = 0;
    for (const s of w.request.segments) {
      if (s.image !== undefined && pos + s.tokens > hitTokens) {
        this.#encoder.delete(s.image);
        this.#encoder.set(s.image, true);
        if (this.#encoder.size > c.encoderCacheItems) this.#encoder.delete(this.#encoder.keys().next().value as number);
      }
      pos += s.tokens;
    }
    this.running++;
    const start = Math.max(now, this.#prefillFreeAt);
    const prefill = this.#prefillMs(w.request, hitTokens, encodes);
    const firstTokenAt = start + prefill;
    this.#prefillFreeAt = firstTokenAt;
    this.busyMs += prefill;
    const served: Served = {
      request: w.request, engine: this.index, admittedAt: now, firstTokenAt, finishedAt: 0, hitTokens,
      encoderHits: w.request.images.length - encodes,
    };
    this.schedule(firstTokenAt, () => {
      const step = decodeStepMs(c, this.running);
      served.finishedAt = firstTokenAt + step * Math.max(0, w.request.outputTokens - 1);
      this.ttftSum += firstTokenAt - w.request.arrival;
      this.ttftCount++;
      w.onFirstToken(served);
      this.schedule(served.finishedAt, () => this.#finish(w, served, outBlocks));
    });
  }

  #finish(w: Waiting, served: Served, outBlocks: number): void {
    for (const k of w.keys) {
      const p = (this.#pins.get(k) ?? 1) - 1;
      if (p <= 0) {
        this.#pins.delete(k);
        this.#pinned--;
      } else this.#pins.set(k, p);
    }
    this.#reserved -= outBlocks;
    // The answer's full blocks join the cache (the next turn of the conversation starts with them).
    const full = blockKeys([...w.request.segments, w.request.answer], this.cost.blockTokens).slice(w.keys.length);
    const stored: number[] = [];
    for (const k of full) {
      if (this.#lru.delete(k)) this.#lru.set(k, true);
      else {
        this.#lru.set(k, true);
        stored.push(k);
      }
    }
    this.#evict();
    if (stored.length > 0) this.listener?.stored(this.index, stored);
    this.running--;
    this.served++;
    const tokens = w.request.outputTokens;
    if (tokens > 1) {
      this.tpotSum += (served.finishedAt - served.firstTokenAt) / (tokens - 1);
      this.tpotCount++;
    }
    w.onFinish(served);
    this.#admit(served.finishedAt);
  }

  /** Drops least recently used unpinned blocks until the resident set fits. */
  #evict(): void {
    if (this.#lru.size <= this.#capacity) return;
    const removed: number[] = [];
    for (const k of this.#lru.keys()) {
      if (this.#lru.size <= this.#capacity) break;
      if (this.#pins.has(k)) continue;
      this.#lru.delete(k);
      removed.push(k);
    }
    if (removed.length > 0) this.listener?.removed(this.index, removed);
  }
}
