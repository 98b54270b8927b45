import type { GenerationRecorder } from '../engine/generation';
import type { Rank } from '../engine/rank';

/** The metrics surface of one simulated engine: per-request hooks plus the `/metrics` text. */
export interface EngineMetrics extends GenerationRecorder {
  /** Prompt tokens looked up in the local prefix cache, and how many hit. */
  prefixCache(rank: Rank, queries: number, hits: number): void;
  /** Multimodal items looked up in the encoder cache (vLLM EC consumer), and how many hit. */
  mmCache(rank: Rank, queries: number, hits: number): void;
  /** Prompt tokens asked of a KV connector, and how many arrived from the remote prefill. */
  externalCache(rank: Rank, queries: number, hits: number): void;
  /** Requests currently waiting on a KV transfer or bootstrap (PD queue gauges). */
  transferWaiting(rank: Rank, delta: number): void;
  /**
   * Reports the KV held for another engine (simulator-only gauges `triad_sim_kv_held_requests` and
   * `triad_sim_kv_held_blocks`): a vLLM prefill's blocks kept for a remote decode, an SGLang decode's blocks
   * pre-allocated for a room whose KV has not arrived, an SGLang prefill's computed rooms no decode has taken.
   */
  kvHeldBy(read: () => HeldKv): void;
  render(): string;
}

/** KV one engine holds for a peer that has not taken it (or not sent it) yet. */
export interface HeldKv {
  readonly requests: number;
  readonly blocks: number;
}

/** Labels every series of an engine shares, plus the rank's own. */
export interface MetricsSetup {
  readonly model: string;
  readonly ranks: readonly Rank[];
  readonly maxModelLen: number;
  readonly loraAdapters: readonly string[];
  /** SGLang `engine_type`: unified, prefill, decode or encode. */
  readonly engineType: string;
}
