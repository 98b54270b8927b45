import { BLOCK_TOKENS } from '../engine/prefix-cache';
import type { HeldKv } from '../metrics/engine-metrics';

/**
 * An SGLang decode's pre-allocated KV: the decode reserves the blocks of a request's prompt when it accepts it
 * (prealloc queue) and holds them while it waits for the prefill's transfer. They are released when the KV arrives
 * (the request then runs), when the request is aborted (its client left) or at the waiting timeout
 * (`SGLANG_DISAGGREGATION_WAITING_TIMEOUT`, 300 s upstream). A prefill that fails without telling the decode leaves
 * them held until then (sgl-project/sglang#28651); a router that aborts the decode leg releases them at once.
 */
export class PreallocatedKv {
  #requests = 0;
  #blocks = 0;

  /** Reserves the blocks of `promptTokens`; returns the release function (idempotent). */
  reserve(promptTokens: number): () => void {
    const blocks = Math.max(1, Math.ceil(promptTokens / BLOCK_TOKENS));
    this.#requests += 1;
    this.#blocks += blocks;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#requests -= 1;
      this.#blocks -= blocks;
    };
  }

  held(): HeldKv {
    return { requests: this.#requests, blocks: this.#blocks };
  }
}
