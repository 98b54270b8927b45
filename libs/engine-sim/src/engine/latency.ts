import type { LatencyOverrides, LatencyProfileName } from '../options';

/** The numbers behind a latency profile. All costs are simulated wall-clock milliseconds. */
export interface LatencyModel {
  /** True for the `zero` profile: no timers at all, answers as fast as the process can. */
  readonly zero: boolean;
  readonly encodeMsPerItem: number;
  readonly prefillMsPer1kTokens: number;
  /** Time per decode step for a single running request; a full batch is `batchSlowdown` times slower per step. */
  readonly decodeMsPerToken: number;
  readonly batchSlowdown: number;
  readonly kvTransferMsPer1kTokens: number;
  /** Running-batch bound; further requests wait in the queue (`num_requests_waiting`). */
  readonly maxRunning: number;
  /** KV pool size in tokens; `kv_cache_usage_perc` is the reserved share of it. */
  readonly kvCapacityTokens: number;
}

const ZERO: LatencyModel = {
  zero: true,
  encodeMsPerItem: 0,
  prefillMsPer1kTokens: 0,
  decodeMsPerToken: 0,
  batchSlowdown: 0,
  kvTransferMsPer1kTokens: 0,
  maxRunning: Number.MAX_SAFE_INTEGER,
  kvCapacityTokens: 1_048_576,
};

// Roughly an 8B model on one modern GPU: ~20 ms per decode step, ~50 ms per 1k prompt tokens, ~30 ms per image.
const REALISTIC: LatencyModel = {
  zero: false,
  encodeMsPerItem: 30,
  prefillMsPer1kTokens: 50,
  decodeMsPerToken: 20,
  batchSlowdown: 0.5,
  kvTransferMsPer1kTokens: 2,
  maxRunning: 64,
  kvCapacityTokens: 131_072,
};

/**
 * Resolves a profile name plus overrides into the model the engine runs with. Timing overrides are honoured in the
 * zero profile too (a zero engine with `decodeMsPerToken: 20` decodes slowly); only an engine whose costs are all
 * zero runs without timers.
 */
export function resolveLatencyModel(name: LatencyProfileName, overrides: LatencyOverrides = {}): LatencyModel {
  const base = name === 'zero' ? ZERO : REALISTIC;
  const defined = Object.fromEntries(Object.entries(overrides).filter(([, v]) => v !== undefined));
  const merged = { ...base, ...defined };
  const timed =
    merged.encodeMsPerItem > 0 || merged.prefillMsPer1kTokens > 0 || merged.decodeMsPerToken > 0 || merged.kvTransferMsPer1kTokens > 0;
  return { ...merged, zero: !timed };
}

/** Costs a request pays before its first token. */
export interface PrefillWork {
  /** Prompt tokens not covered by the prefix cache or a KV transfer. */
  readonly computeTokens: number;
  /** Multimodal items that must be encoded locally (EC-cache misses). */
  readonly encodeItems: number;
  /** Tokens whose KV arrives from a remote prefill. */
  readonly transferTokens: number;
}

export function timeToFirstTokenMs(model: LatencyModel, work: PrefillWork): number {
  if (model.zero) return 0;
  return (
    work.encodeItems * model.encodeMsPerItem +
    (work.computeTokens / 1000) * model.prefillMsPer1kTokens +
    (work.transferTokens / 1000) * model.kvTransferMsPer1kTokens
  );
}

/** Length of one decode step given how many requests share the batch. */
export function decodeStepMs(model: LatencyModel, running: number): number {
  const load = Math.min(1, running / model.maxRunning);
  return model.decodeMsPerToken * (1 + model.batchSlowdown * load);
}
