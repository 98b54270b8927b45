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

/** What an engine does with a request: all of it, its prefill alone (P), or its decode from transferred KV (D). */
export type JobKind = 'full' | 'prefill' | 'kv';

/** The engine's role in its pool: `both` serves whole requests; the others one stage each. */
export type EngineRole = 'both' | 'prefill' | 'decode';

export interface JobOptions {
  readonly kind?: JobKind;
  /** Media items whose encoder output arrived with the request (EPD): not encoded here. */
  readonly handed?: ReadonlySet<number>;
}

interface Waiting {
  readonly request: SimRequest;
  readonly keys: number[];
  readonly kind: JobKind;
  readonly handed: ReadonlySet<number> | undefined;
  readonly submittedAt: number;
  readonly onFirstToken: (s: Served) => void;
  readonly onFinish: (s: Served) => void;
}

const NOTHING: ReadonlySet<number> = new Set();

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
  /** Prefill time that held this engine's running decodes back, in total (see `prefillStallsDecode`). */
  #stallTotal = 0;
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
    readonly role: EngineRole = 'both',
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
    while (n < keys.length && this.#lru.has(keys[n])) n++;
    return n * this.cost.blockTokens;
  }

  hasEncoded(image: number): boolean {
    return this.#encoder.has(image);
  }

  /** Prefill cost of a request here and now (encode + uncached tokens), ms: what an oracle minimises. */
  prefillCostMs(request: SimRequest, keys: readonly number[], handed?: ReadonlySet<number>): number {
    const hit = this.cachedPrefixTokens(keys);
    return this.#prefillMs(request, hit, this.#encodes(request, hit, handed ?? NOTHING));
  }

  /**
   * Takes a request (or one stage of it). `onFirstToken` runs when the engine emits the request's first token
   * (for a `prefill` job: when its prefill ends, the KV ready to leave); `onFinish` when it is done (a `prefill` job:
   * once its KV left, `kvTransferMsPer1kTokens` later).
   */
  submit(
    request: SimRequest,
    now: number,
    onFirstToken: (s: Served) => void,
    onFinish: (s: Served) => void,
    keys?: number[],
    job: JobOptions = {},
  ): void {
    this.#queue.push({
      request,
      keys: keys ?? blockKeys(request.segments, this.cost.blockTokens),
      kind: job.kind ?? 'full',
      handed: job.handed,
      submittedAt: now,
      onFirstToken,
      onFinish,
    });
    this.#admit(now);
  }

  #encodes(request: SimRequest, hitTokens: number, handed: ReadonlySet<number>): number {
    // Images inside the cached prefix need no encoding; the others are encoded unless the encoder cache has them
    // or their encoder output came with the request.
    let pos = 0,
      n = 0;
    for (const s of request.segments) {
      if (s.image !== undefined && pos + s.tokens > hitTokens && !this.#encoder.has(s.image) && !handed.has(s.image)) n++;
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
      const w = this.#queue[0];
      const outBlocks = w.kind === 'prefill' ? 0 : Math.ceil(w.request.outputTokens / c.blockTokens);
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
    const encodes = w.kind === 'kv' ? 0 : this.#encodes(w.request, hitTokens, w.handed ?? NOTHING);
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
    if (w.kind !== 'kv') {
      // The request's images (computed here or handed over) are in this engine's encoder cache afterwards.
      let pos = 0;
      for (const s of w.request.segments) {
        if (s.image !== undefined && pos + s.tokens > hitTokens) {
          this.#encoder.delete(s.image);
          this.#encoder.set(s.image, true);
          if (this.#encoder.size > c.encoderCacheItems) this.#encoder.delete(this.#encoder.keys().next().value as number);
        }
        pos += s.tokens;
      }
    }
    this.running++;
    let firstTokenAt: number;
    if (w.kind === 'kv') {
      // The prefill's KV arrives for the blocks not cached here; then one decode step gives the first token.
      const transfer = ((w.request.promptTokens - hitTokens) / 1000) * c.kvTransferMsPer1kTokens;
      firstTokenAt = now + transfer + decodeStepMs(c, this.running);
    } else {
      const start = Math.max(now, this.#prefillFreeAt);
      const prefill = this.#prefillMs(w.request, hitTokens, encodes);
      firstTokenAt = start + prefill;
      this.#prefillFreeAt = firstTokenAt;
      this.busyMs += prefill;
      if (c.prefillStallsDecode && this.role !== 'prefill') this.#stallTotal += prefill;
    }
    const served: Served = {
      request: w.request,
      engine: this.index,
      admittedAt: now,
      firstTokenAt,
      finishedAt: 0,
      hitTokens,
      encoderHits: w.kind === 'kv' ? w.request.images.length : w.request.images.length - encodes,
    };
    this.schedule(firstTokenAt, () => {
      this.ttftSum += firstTokenAt - w.submittedAt;
      this.ttftCount++;
      if (w.kind === 'prefill') {
        // The KV leaves for the decode pod; the blocks stay pinned until it has.
        served.finishedAt = firstTokenAt + (w.request.promptTokens / 1000) * c.kvTransferMsPer1kTokens;
        w.onFirstToken(served);
        this.schedule(served.finishedAt, () => this.#finish(w, served, outBlocks));
        return;
      }
      const step = decodeStepMs(c, this.running);
      served.finishedAt = firstTokenAt + step * Math.max(0, w.request.outputTokens - 1);
      w.onFirstToken(served);
      const stallMark = this.#stallTotal;
      this.schedule(served.finishedAt, () => this.#decodeDone(w, served, outBlocks, stallMark));
    });
  }

  /** The decode ran its steps, unless prefills held the batch back meanwhile: then it finishes that much later. */
  #decodeDone(w: Waiting, served: Served, outBlocks: number, stallMark: number): void {
    const held = this.#stallTotal - stallMark;
    if (held > 0) {
      served.finishedAt += held;
      const mark = this.#stallTotal;
      this.schedule(served.finishedAt, () => this.#decodeDone(w, served, outBlocks, mark));
      return;
    }
    this.#finish(w, served, outBlocks);
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
    const full =
      w.kind === 'prefill' ? [] : blockKeys([...w.request.segments, w.request.answer], this.cost.blockTokens).slice(w.keys.length);
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
    const tokens = w.kind === 'prefill' ? 0 : w.request.outputTokens;
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
