import { BlockPool, type PublishedBlock } from './block-pool';
import { EncoderCache } from './encoder-cache';

/**
 * What a vLLM V1 engine core is configured with (vLLM's flag in brackets). Costs are simulated wall-clock ms.
 */
export interface EngineCoreConfig {
  /** Requests in the running batch at most (`--max-num-seqs`). */
  readonly maxNumSeqs: number;
  /** Tokens computed per step at most, prefill chunks and decodes together (`--max-num-batched-tokens`). */
  readonly maxNumBatchedTokens: number;
  /** Tokens per KV block (`--block-size`). */
  readonly blockSize: number;
  /** KV blocks in the pool (`num_gpu_blocks`). */
  readonly numBlocks: number;
  /** Encoder cache size in embeddings (`encoder_cache_size`; 64 images of 256 tokens = 16 384). */
  readonly encoderCacheEmbeds: number;
  /** Encoder embeddings computed per step at most (`max_num_batched_encoder_embeds`). */
  readonly encoderBudgetEmbeds: number;
  /** Forward-pass cost per 1,000 prefill tokens in a step. */
  readonly prefillMsPer1kTokens: number;
  /** A step's cost for its decodes with one request running; a full batch costs `1 + batchSlowdown` times that. */
  readonly decodeMsPerToken: number;
  readonly batchSlowdown: number;
  /** Vision-encoder cost per item encoded in a step. */
  readonly encodeMsPerItem: number;
  /** Fixed cost of a step (scheduling, sampling). */
  readonly stepOverheadMs: number;
}

/** One multimodal item of a request: where its placeholder tokens sit in the prompt. */
export interface CoreItem {
  /** The encoder-cache key (vLLM `mm_features[i].identifier`). */
  readonly id: string;
  /** Placeholder tokens (= encoder embeddings). */
  readonly embeds: number;
  /** Offset of the first placeholder token in the prompt. */
  readonly start: number;
  /** Its encoding arrives through an EC connector (loaded, not computed here). */
  readonly external: boolean;
}

export interface CoreRequestSpec {
  readonly id: string;
  readonly promptTokens: number;
  /** Hashes of the prompt's full blocks, chained (block i's hash depends on every token before its end). */
  readonly blockHashes: readonly number[];
  /** The engine's keys of the leading blocks (when it publishes KV events): block i's wire hash and tokens. */
  readonly published?: readonly PublishedBlock[];
  readonly items: readonly CoreItem[];
  /** Output tokens to produce (the request finishes after the last one). */
  readonly maxTokens: number;
  /** Prompt tokens whose KV came from a remote prefill (`num_external_computed_tokens`). */
  readonly externalTokens: number;
  /** Called at the end of each step that produced a token for this request (the first call is the first token). */
  onToken(): void;
  /** Called once when the request finished (all tokens) or was aborted. */
  onFinish(aborted: boolean): void;
  /** Called when the request is admitted to the running batch (left the waiting queue). */
  onScheduled?(): void;
}

/** What the engine reports as it schedules (metrics and counters of the sim). */
export interface EngineCoreHooks {
  /** A waiting request's prefix-cache lookup when it is scheduled: prompt tokens asked, tokens hit. */
  prefixLookup(queries: number, hits: number): void;
  /** An item needed by a scheduled chunk: found in the encoder cache, encoded here, or loaded from a connector. */
  encoderLookup(outcome: 'hit' | 'encoded' | 'loaded'): void;
  preempted(): void;
  /** After every scheduling decision and step (gauges read running/waiting/usage). */
  changed(): void;
  /** A step ended. */
  stepped(): void;
}

class CoreRequest {
  numComputed = 0;
  output = 0;
  blocks: number[] = [];
  /** Items this request holds a reference to in the encoder cache. */
  readonly held = new Set<string>();
  /** Items counted for the hit ratio already (a preempted request does not count again). */
  readonly counted = new Set<string>();
  lookedUp = false;
  done = false;
  constructor(readonly spec: CoreRequestSpec) {}
  get numTokens(): number {
    return this.spec.promptTokens + this.output;
  }
}

/** The encoder side of one step: embeddings left to compute, items encoded, and the pending request's reservation. */
interface EncoderStep {
  budget: number;
  encodes: number;
  commit: () => void;
}

interface StepPlan {
  readonly tokens: Map<CoreRequest, number>;
  readonly prefillTokens: number;
  readonly decodes: number;
  readonly encodes: number;
}

/**
 * One engine core (one DP rank) that schedules like vLLM V1's `Scheduler.schedule()`
 * (`vllm/v1/core/sched/scheduler.py`): each step first gives the running requests their next tokens (a decode is
 * one token, an unfinished prefill its next chunk) within the token budget, preempting the newest running request
 * when the KV pool has no block for an older one; then, if nothing was preempted, admits waiting requests in
 * arrival order while the batch has room: prefix-cache lookup, encoder inputs of the chunk (cache hit, or encode
 * within the encoder budget and cache room; otherwise the chunk stops before the item), then block allocation (no
 * room: the request and everything behind it wait). A step lasts as long as its work costs; at its end every
 * request whose computed tokens reached its length samples one token.
 */
export class EngineCore {
  readonly pool: BlockPool;
  readonly encoderCache: EncoderCache;
  readonly #waiting: CoreRequest[] = [];
  readonly #running: CoreRequest[] = [];
  readonly #byId = new Map<string, CoreRequest>();
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;
  steps = 0;
  preemptions = 0;

  constructor(
    readonly config: EngineCoreConfig,
    readonly hooks: EngineCoreHooks,
  ) {
    this.pool = new BlockPool(config.numBlocks);
    this.encoderCache = new EncoderCache(config.encoderCacheEmbeds);
  }

  get running(): number {
    return this.#running.length;
  }

  get waiting(): number {
    return this.#waiting.length;
  }

  /** Whether a request of this size can ever get its blocks (else it would wait forever). */
  fits(promptTokens: number, maxTokens: number): boolean {
    return Math.ceil((promptTokens + maxTokens) / this.config.blockSize) <= this.config.numBlocks;
  }

  submit(spec: CoreRequestSpec): void {
    const r = new CoreRequest(spec);
    this.#byId.set(spec.id, r);
    this.#waiting.push(r);
    this.hooks.changed();
    this.#kick();
  }

  /** The client went away: the request leaves the queue or the batch and frees what it held. */
  abort(id: string): void {
    const r = this.#byId.get(id);
    if (!r || r.done) return;
    const w = this.#waiting.indexOf(r);
    if (w >= 0) this.#waiting.splice(w, 1);
    const i = this.#running.indexOf(r);
    if (i >= 0) this.#running.splice(i, 1);
    this.#release(r);
    this.#finish(r, true);
    this.#kick();
  }

  /** Engine shutdown: every request ends as aborted, no more steps. */
  stop(): void {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    for (const r of [...this.#running, ...this.#waiting]) this.#finish(r, true);
    this.#running.length = 0;
    this.#waiting.length = 0;
  }

  resetPrefixCache(): void {
    this.pool.resetPrefixCache();
  }

  #kick(): void {
    if (this.#timer || this.#stopped) return;
    const plan = this.#schedule();
    this.hooks.changed();
    if (plan.tokens.size === 0) return;
    const c = this.config;
    const load = Math.min(1, this.#running.length / c.maxNumSeqs);
    const ms =
      c.stepOverheadMs +
      (plan.decodes > 0 ? c.decodeMsPerToken * (1 + c.batchSlowdown * load) : 0) +
      (plan.prefillTokens / 1000) * c.prefillMsPer1kTokens +
      plan.encodes * c.encodeMsPerItem;
    this.#timer = setTimeout(
      () => {
        this.#timer = undefined;
        this.steps++;
        this.hooks.stepped();
        this.#complete(plan);
        this.hooks.changed();
        this.#kick();
      },
      Math.max(1, ms),
    );
  }

  #schedule(): StepPlan {
    const c = this.config;
    const tokens = new Map<CoreRequest, number>();
    let budget = c.maxNumBatchedTokens;
    const enc: EncoderStep = { budget: c.encoderBudgetEmbeds, encodes: 0, commit: () => undefined };
    let prefillTokens = 0;
    let decodes = 0;
    let preempted = false;
    const take = (r: CoreRequest, n: number) => {
      tokens.set(r, n);
      budget -= n;
      if (r.numComputed >= r.spec.promptTokens && n === 1) decodes++;
      else prefillTokens += n;
    };

    // Running requests first, oldest first.
    let i = 0;
    while (i < this.#running.length && budget > 0) {
      const r = this.#running[i];
      let n = Math.min(r.numTokens - r.numComputed, budget);
      n = this.#scheduleItems(r, r.numComputed, n, enc);
      if (n <= 0) {
        i++;
        continue;
      }
      let ok = this.#grow(r, n);
      while (!ok) {
        // Preempt the newest running request (FCFS policy) and retry; preempting this one ends the attempt.
        const victim = this.#running.pop() as CoreRequest;
        const had = tokens.get(victim);
        if (had !== undefined) {
          tokens.delete(victim);
          budget += had;
        }
        this.#preempt(victim);
        preempted = true;
        if (victim === r) break;
        ok = this.#grow(r, n);
      }
      if (!ok) {
        this.#releaseItems(r);
        break;
      }
      enc.commit();
      take(r, n);
      i++;
    }

    // Then waiting requests, in order, unless this step preempted (vLLM admits none then).
    while (!preempted && this.#waiting.length > 0 && budget > 0 && this.#running.length < c.maxNumSeqs) {
      const r = this.#waiting[0];
      const usable = Math.floor(Math.max(0, r.numTokens - 1) / c.blockSize);
      const cached = this.pool.cachedPrefix(r.spec.blockHashes.slice(0, usable));
      const local = cached.length * c.blockSize;
      const external = r.output === 0 ? Math.max(0, Math.min(r.spec.externalTokens, r.numTokens - 1) - local) : 0;
      const computed = local + external;
      let n = Math.min(r.numTokens - computed, budget);
      n = this.#scheduleItems(r, computed, n, enc);
      if (n <= 0) break;
      if (!this.#admit(r, cached, computed, n)) {
        this.#releaseItems(r);
        break;
      }
      if (!r.lookedUp) {
        r.lookedUp = true;
        this.hooks.prefixLookup(r.spec.promptTokens, local);
      }
      enc.commit();
      this.#waiting.shift();
      this.#running.push(r);
      r.numComputed = computed;
      take(r, n);
      r.spec.onScheduled?.();
    }
    return { tokens, prefillTokens, decodes, encodes: enc.encodes };
  }

  /**
   * `_try_schedule_encoder_inputs`: the items whose placeholders overlap the chunk [computed, computed + n) must be
   * in the encoder cache, loaded from a connector, or encoded in this step; an item that cannot be (budget, cache
   * room) cuts the chunk just before it. Items wholly before `computed` (a prefix-cache hit) are not needed.
   */
  #scheduleItems(r: CoreRequest, computed: number, n: number, enc: EncoderStep): number {
    enc.commit = () => undefined;
    const toAllocate: CoreItem[] = [];
    let pending = 0;
    let cut = n;
    for (const item of r.spec.items) {
      if (item.start >= computed + n) break;
      if (item.start + item.embeds <= computed || r.held.has(item.id) || toAllocate.some((i) => i.id === item.id)) continue;
      if (this.encoderCache.lookup(item.id, r.spec.id, item.embeds)) {
        r.held.add(item.id);
        if (!r.counted.has(item.id)) this.hooks.encoderLookup('hit');
        r.counted.add(item.id);
        continue;
      }
      const compute = !item.external;
      if ((compute && item.embeds > enc.budget - pending) || !this.encoderCache.canAllocate(item.embeds, pending)) {
        cut = Math.max(0, item.start - computed);
        break;
      }
      pending += item.embeds;
      toAllocate.push(item);
    }
    if (cut <= 0) return 0;
    // Room is reserved only for what the request will really run (`allocate` after scheduling, as vLLM does).
    enc.commit = () => {
      for (const item of toAllocate) {
        this.encoderCache.allocate(item.id, r.spec.id, item.embeds);
        r.held.add(item.id);
        if (!item.external) {
          enc.budget -= item.embeds;
          enc.encodes++;
        }
        if (!r.counted.has(item.id)) this.hooks.encoderLookup(item.external ? 'loaded' : 'encoded');
        r.counted.add(item.id);
      }
    };
    return cut;
  }

  /** `allocate_slots` for a running request: blocks for its next `n` tokens. */
  #grow(r: CoreRequest, n: number): boolean {
    const fresh = Math.max(0, Math.ceil((r.numComputed + n) / this.config.blockSize) - r.blocks.length);
    const got = this.pool.allocate(fresh);
    if (!got) return false;
    r.blocks.push(...got);
    return true;
  }

  /** `allocate_slots` on admission: the prefix hits `cached` plus blocks for `computed + n` tokens. */
  #admit(r: CoreRequest, cached: readonly number[], computed: number, n: number): boolean {
    const fresh = Math.max(0, Math.ceil((computed + n) / this.config.blockSize) - cached.length);
    // Cached blocks nobody holds sit in the free queue: taking them leaves that many fewer to allocate.
    const idle = cached.filter((b) => this.pool.refCount(b) === 0).length;
    if (fresh > this.pool.freeBlocks - idle) return false;
    this.pool.touch(cached);
    r.blocks = [...cached, ...(this.pool.allocate(fresh) as number[])];
    return true;
  }

  #complete(plan: StepPlan): void {
    const bs = this.config.blockSize;
    for (const [r, n] of plan.tokens) {
      if (r.done) continue;
      r.numComputed += n;
      // Full prompt blocks become cached (`cache_full_blocks`).
      const full = Math.min(Math.floor(Math.min(r.numComputed, r.spec.promptTokens) / bs), r.spec.blockHashes.length, r.blocks.length);
      this.pool.cacheFull(r.blocks, r.spec.blockHashes, r.spec.published, full);
      // Encoder outputs whose placeholders are all computed are no longer needed by this request.
      for (const item of r.spec.items)
        if (r.held.has(item.id) && item.start + item.embeds <= r.numComputed) {
          this.encoderCache.release(item.id, r.spec.id, item.embeds);
          r.held.delete(item.id);
        }
      if (r.numComputed < r.numTokens) continue;
      r.output++;
      r.spec.onToken();
      if (r.output >= r.spec.maxTokens) {
        const at = this.#running.indexOf(r);
        if (at >= 0) this.#running.splice(at, 1);
        this.#release(r);
        this.#finish(r, false);
      }
    }
  }

  #preempt(r: CoreRequest): void {
    this.#release(r);
    r.numComputed = 0;
    this.#waiting.unshift(r);
    this.preemptions++;
    this.hooks.preempted();
  }

  #releaseItems(r: CoreRequest): void {
    for (const item of r.spec.items) if (r.held.delete(item.id)) this.encoderCache.release(item.id, r.spec.id, item.embeds);
  }

  #release(r: CoreRequest): void {
    this.pool.free(r.blocks);
    r.blocks = [];
    this.#releaseItems(r);
  }

  #finish(r: CoreRequest, aborted: boolean): void {
    if (r.done) return;
    r.done = true;
    this.#byId.delete(r.spec.id);
    r.spec.onFinish(aborted);
  }
}
