import type { SimCounters } from '../../counters';
import type { EngineMetrics } from '../../metrics/engine-metrics';
import type { EngineCoreOptions } from '../../options';
import type { LatencyModel } from '../latency';
import type { Rank } from '../rank';
import { EngineCore, type EngineCoreConfig } from './engine-core';

/** vLLM's default block size, and the largest item the simulated model has (a video: 1024 placeholder tokens). */
const BLOCK_SIZE = 16;
const MAX_TOKENS_PER_ITEM = 1024;

/** The engine-core configuration of one rank: the options, else the latency model and vLLM's defaults. */
export function engineCoreConfig(model: LatencyModel, options: EngineCoreOptions): EngineCoreConfig {
  const maxNumBatchedTokens = options.maxNumBatchedTokens ?? 8192;
  return {
    maxNumSeqs: options.maxNumSeqs ?? model.maxRunning,
    maxNumBatchedTokens,
    blockSize: BLOCK_SIZE,
    numBlocks: Math.max(1, Math.floor(model.kvCapacityTokens / BLOCK_SIZE)),
    encoderCacheEmbeds: options.encoderCacheEmbeds ?? Math.max(maxNumBatchedTokens, MAX_TOKENS_PER_ITEM),
    encoderBudgetEmbeds: Math.max(maxNumBatchedTokens, MAX_TOKENS_PER_ITEM),
    prefillMsPer1kTokens: model.prefillMsPer1kTokens,
    decodeMsPerToken: model.decodeMsPerToken,
    batchSlowdown: model.batchSlowdown,
    encodeMsPerItem: model.encodeMsPerItem,
    stepOverheadMs: options.stepOverheadMs ?? 1,
  };
}

/**
 * Gives every rank an engine core. The rank's gauges (running, waiting, KV in use) follow the core after each
 * scheduling decision, so `/metrics` reports what vLLM's would at that moment; prefix lookups feed
 * `vllm:prefix_cache_queries/hits` and the counters the benchmarks read.
 */
export function attachEngineCores(
  ranks: readonly Rank[],
  model: LatencyModel,
  options: EngineCoreOptions,
  metrics: EngineMetrics,
  counters: SimCounters,
): void {
  const config = engineCoreConfig(model, options);
  for (const rank of ranks) {
    const core: EngineCore = new EngineCore(config, {
      prefixLookup: (queries, hits) => {
        metrics.prefixCache(rank, queries, hits);
        counters.inc('prefixQueryTokens', queries);
        counters.inc('prefixHitTokens', hits);
      },
      encoderLookup: (outcome) =>
        counters.inc(outcome === 'hit' ? 'encoderCacheHits' : outcome === 'encoded' ? 'encoderCacheMisses' : 'encoderInputsLoaded'),
      preempted: () => counters.inc('preemptions'),
      changed: () => {
        rank.running = core.running;
        rank.waiting = core.waiting;
        rank.kvUsedTokens = Math.round(core.pool.usage() * model.kvCapacityTokens);
      },
      stepped: () => counters.inc('engineSteps'),
    });
    rank.core = core;
  }
}
