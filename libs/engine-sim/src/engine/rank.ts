import { decodeStepMs, type LatencyModel } from './latency';
import type { EngineCore } from './core/engine-core';
import { PrefixCache, type PromptCache } from './prefix-cache';

interface Waiter {
  readonly kvTokens: number;
  readonly resolve: (admitted: boolean) => void;
  cancelled: boolean;
}

/** A place in the waiting queue; `cancel` removes it (client went away before admission). */
export interface QueueTicket {
  /** true once admitted; false when cancelled first. */
  readonly admitted: Promise<boolean>;
  cancel(): void;
}

/**
 * One data-parallel engine rank: a bounded running batch, a FIFO waiting queue, a KV pool and a prefix cache.
 * Decode steps are shared: every running request waits on the same step, so the batch advances together
 * (continuous batching) and a fuller batch makes each step slower.
 */
export class Rank {
  running = 0;
  waiting = 0;
  kvUsedTokens = 0;
  /** Replaced by the token-keyed cache when the engine publishes KV events. */
  prefixCache: PromptCache;
  /** Set when the engine runs the vLLM V1 engine-core model (`engineCore`): it then schedules, not this rank. */
  core: EngineCore | undefined;
  readonly #model: LatencyModel;
  readonly #queue: Waiter[] = [];
  #step: Promise<void> | undefined;
  #timers = new Set<NodeJS.Timeout>();

  constructor(
    readonly index: number,
    model: LatencyModel,
  ) {
    this.#model = model;
    this.prefixCache = new PrefixCache(Math.floor(model.kvCapacityTokens / 16));
  }

  /** KV pool usage in 0..1. */
  kvUsage(): number {
    return Math.min(1, this.kvUsedTokens / this.#model.kvCapacityTokens);
  }

  #fits(kvTokens: number): boolean {
    if (this.running >= this.#model.maxRunning) return false;
    // An empty engine always admits, so one oversized request cannot wedge the queue.
    return this.running === 0 || this.kvUsedTokens + kvTokens <= this.#model.kvCapacityTokens;
  }

  /** Admits at once when there is room and nobody is queued ahead. */
  tryAdmit(kvTokens: number): boolean {
    if (this.#queue.length > 0 || !this.#fits(kvTokens)) return false;
    this.running++;
    this.kvUsedTokens += kvTokens;
    return true;
  }

  enqueue(kvTokens: number): QueueTicket {
    let waiter!: Waiter;
    const admitted = new Promise<boolean>((resolve) => {
      waiter = { kvTokens, resolve, cancelled: false };
    });
    this.#queue.push(waiter);
    this.waiting++;
    return {
      admitted,
      cancel: () => {
        if (waiter.cancelled) return;
        waiter.cancelled = true;
        const at = this.#queue.indexOf(waiter);
        if (at >= 0) {
          this.#queue.splice(at, 1);
          this.waiting--;
          waiter.resolve(false);
        }
      },
    };
  }

  release(kvTokens: number): void {
    this.running--;
    this.kvUsedTokens -= kvTokens;
    while (this.#queue.length > 0) {
      const next = this.#queue[0];
      if (!this.#fits(next.kvTokens)) break;
      this.#queue.shift();
      this.waiting--;
      this.running++;
      this.kvUsedTokens += next.kvTokens;
      next.resolve(true);
    }
  }

  /** Resolves at the end of the next decode step (all callers of the same step resolve together). */
  nextStep(): Promise<void> {
    if (!this.#step) {
      this.#step = new Promise<void>((resolve) => {
        const timer = setTimeout(
          () => {
            this.#timers.delete(timer);
            this.#step = undefined;
            resolve();
          },
          decodeStepMs(this.#model, this.running),
        );
        this.#timers.add(timer);
      });
    }
    return this.#step;
  }

  /** Cancels pending step timers (engine shutdown). */
  stop(): void {
    this.core?.stop();
    for (const t of this.#timers) clearTimeout(t);
    this.#timers.clear();
  }
}
