import type { EngineCoreOptions, LatencyOverrides, SimRole } from '@triad/engine-sim';
import { REALISTIC_COST, type CostModel } from '../cluster-sim/cost-model';

/**
 * The engines of the cluster benchmark: the engine-sim's realistic profile (an 8B model on one GPU) scaled down so
 * a 2-core machine can run the router and N engines at once: 16 running requests, a 16k-token KV pool (1,024
 * blocks: the 16 system prompts of the chat workload do not all fit, so placement matters), an encoder cache of 64
 * images (256 embeddings each; 1,024 on an encoder-only pod), 2,048 tokens per step.
 */
export const ENGINE = {
  maxNumSeqs: 16,
  maxNumBatchedTokens: 2048,
  kvCapacityTokens: 16_384,
  encoderCacheItems: 64,
  encoderPodCacheItems: 1024,
  imageTokens: 256,
} as const;

/**
 * `timeScale` stretches every engine cost (a step of 20 ms lasts 20·timeScale ms), so the same utilisation needs
 * timeScale times fewer requests per second: the router and the load generator then cost timeScale times less
 * CPU per simulated GPU second. Reported latencies are divided by it again (GPU-equivalent ms).
 */
export function engineLatency(timeScale: number): LatencyOverrides {
  return {
    prefillMsPer1kTokens: REALISTIC_COST.prefillMsPer1kTokens * timeScale,
    decodeMsPerToken: REALISTIC_COST.decodeMsPerToken * timeScale,
    encodeMsPerItem: REALISTIC_COST.encodeMsPerItem * timeScale,
    kvTransferMsPer1kTokens: REALISTIC_COST.kvTransferMsPer1kTokens * timeScale,
    maxRunning: ENGINE.maxNumSeqs,
    kvCapacityTokens: ENGINE.kvCapacityTokens,
  };
}

export function engineCoreOptions(role: SimRole, timeScale: number): EngineCoreOptions {
  const items = role === 'encode' ? ENGINE.encoderPodCacheItems : ENGINE.encoderCacheItems;
  return {
    maxNumSeqs: ENGINE.maxNumSeqs,
    maxNumBatchedTokens: ENGINE.maxNumBatchedTokens,
    encoderCacheEmbeds: items * ENGINE.imageTokens,
    stepOverheadMs: REALISTIC_COST.prefillOverheadMs * timeScale,
  };
}

/** The discrete-event simulator's cost model for the same engines (calibration runs both on it). */
export const CLUSTER_COST: CostModel = Object.freeze({
  ...REALISTIC_COST,
  maxRunning: ENGINE.maxNumSeqs,
  kvCapacityTokens: ENGINE.kvCapacityTokens,
  encoderCacheItems: ENGINE.encoderCacheItems,
  encoderPodCacheItems: ENGINE.encoderPodCacheItems,
  tokensPerImage: ENGINE.imageTokens,
});
