import type { Endpoint } from '../state/endpoint';
import type { ObservedLatency } from '../state/observed-latency';
import type { PrefillBacklog } from '../state/prefill-backlog';

/**
 * The candidates of one profile run, column-oriented: candidate `i` (0 ≤ i < size) has its metrics at index `i`
 * of each typed array. Plugins loop over the columns; `endpoint(i)` gives the full object when one is needed
 * (keys, records, model lists). Arrays may be longer than `size`: never read past it.
 */
export interface Candidates {
  readonly size: number;
  readonly running: Float64Array;
  readonly waiting: Float64Array;
  /** KV-cache usage 0..1. */
  readonly kvCacheUsage: Float64Array;
  /** Mean TTFT, ms; 0 = no data. */
  readonly ttftMs: Float64Array;
  /** Mean TPOT, ms; 0 = no data. */
  readonly tpotMs: Float64Array;
  /** When the latency means last took in new observations (ms since epoch). */
  readonly latencyAt: Float64Array;
  /** Last successful scrape (ms since epoch; 0 = never). */
  readonly scrapedAt: Float64Array;
  /** 1 when the pod-watcher marked the metrics stale. */
  readonly stale: Uint8Array;
  /** 32-bit hash of the endpoint key. */
  readonly keyHash: Uint32Array;
  endpoint(i: number): Endpoint;
  /** Candidate index of the endpoint with this key, or -1. */
  indexOf(key: string): number;
  /** In-flight requests per candidate across all gateways (computed on first use in a run). */
  inflight(): Float64Array;
  /** TTFT/TPOT per endpoint key as the gateways measured them (read by key; do not mutate). */
  readonly observed: ObservedLatency;
  /** Prompt tokens in flight per endpoint key (read by key; do not mutate). */
  readonly backlog: PrefillBacklog;
}
