/**
 * The simulated engine's costs (docs/routing-benchmark.md explains each number and where it comes from). They are
 * the engine-sim's `realistic` profile (libs/engine-sim/src/engine/latency.ts: roughly an 8B model on one GPU)
 * plus the cache sizes a prefix/encoder-cache simulation needs. Nothing here knows how requests are routed.
 */
export interface CostModel {
  /** Prefill compute per 1,000 prompt tokens not served from the prefix cache, ms. */
  readonly prefillMsPer1kTokens: number;
  /** Fixed cost of one prefill (scheduling, sampling the first token), ms. */
  readonly prefillOverheadMs: number;
  /** Vision-encoder time per media item not in the encoder cache (and not covered by a prefix hit), ms. */
  readonly encodeMsPerItem: number;
  /** Decode step for a lone request, ms per output token. */
  readonly decodeMsPerToken: number;
  /** A full batch (maxRunning) makes each decode step this much slower (1 + slowdown · running/maxRunning). */
  readonly batchSlowdown: number;
  /** Requests running at once (continuous batching); further ones wait in the engine's queue. */
  readonly maxRunning: number;
  /** KV pool, tokens; running requests pin their blocks, finished ones stay cached until evicted (LRU). */
  readonly kvCapacityTokens: number;
  /** Tokens per KV block (prefix caching works on whole blocks). */
  readonly blockTokens: number;
  /** Encoder outputs kept per engine (LRU, items). */
  readonly encoderCacheItems: number;
  /** Tokens one image stands for in the prompt. */
  readonly tokensPerImage: number;
  /** Transfer of a prefill's KV to a decode pod, ms per 1,000 tokens (PD). */
  readonly kvTransferMsPer1kTokens: number;
  /** Moving one item's encoder output from an encoder pod to its consumer (EPD), ms. */
  readonly ecTransferMsPerItem: number;
  /** One extra leg of a disaggregated request (the router's HTTP hop and the engine's request set-up), ms. */
  readonly legOverheadMs: number;
  /** Encoder outputs an encoder-only pod keeps (LRU, items): its memory holds no KV cache. */
  readonly encoderPodCacheItems: number;
  /** A prefill on an engine that also decodes holds its running decodes back for the prefill's length. */
  readonly prefillStallsDecode: boolean;
}

export const REALISTIC_COST: CostModel = Object.freeze({
  prefillMsPer1kTokens: 50,
  prefillOverheadMs: 2,
  encodeMsPerItem: 30,
  decodeMsPerToken: 20,
  batchSlowdown: 0.5,
  maxRunning: 64,
  kvCapacityTokens: 131_072,
  blockTokens: 16,
  encoderCacheItems: 64,
  tokensPerImage: 576,
  kvTransferMsPer1kTokens: 2,
  ecTransferMsPerItem: 5,
  legOverheadMs: 3,
  encoderPodCacheItems: 1024,
  prefillStallsDecode: true,
});

/** Decode step length with `running` requests in the batch. */
export function decodeStepMs(cost: CostModel, running: number): number {
  return cost.decodeMsPerToken * (1 + cost.batchSlowdown * Math.min(1, running / cost.maxRunning));
}
