import type { InferenceEngine } from '@triad/crd';
import type { HistogramTotals } from './histogram-mean';
import { NO_RANK, blockStartOf, forEachSample } from './sample-scan';

/** Load figures read from one /metrics response, summed over every series (DP ranks, label sets). */
export interface EngineLoad {
  readonly running: number;
  readonly waiting: number;
  /** Mean KV-cache usage over the engine's ranks, 0..1. */
  readonly kvCacheUsage: number;
  readonly ttft: HistogramTotals | undefined;
  readonly tpot: HistogramTotals | undefined;
  /** Running and waiting per DP rank (index = `dp_rank`), when the series carry that label for more than one rank. */
  readonly dpRanks?: { running: number; waiting: number }[];
}

interface MetricNames {
  readonly running: string;
  readonly waiting: string;
  /** Current name first, then older names some builds still serve. */
  readonly kvUsage: readonly string[];
  readonly ttft: readonly string[];
  readonly tpot: readonly string[];
}

/** The metric names each engine serves (docs/protocols/vllm.md, sglang.md: Kthena's table plus renamed and older names). */
const ENGINE_METRIC_NAMES: Readonly<Record<InferenceEngine, MetricNames>> = {
  vLLM: {
    running: 'vllm:num_requests_running',
    waiting: 'vllm:num_requests_waiting',
    kvUsage: ['vllm:kv_cache_usage_perc', 'vllm:gpu_cache_usage_perc'],
    ttft: ['vllm:time_to_first_token_seconds'],
    tpot: ['vllm:inter_token_latency_seconds', 'vllm:time_per_output_token_seconds'],
  },
  SGLang: {
    running: 'sglang:num_running_reqs',
    waiting: 'sglang:num_queue_reqs',
    kvUsage: ['sglang:token_usage'],
    ttft: ['sglang:time_to_first_token_seconds'],
    tpot: ['sglang:inter_token_latency_seconds', 'sglang:time_per_output_token_seconds'],
  },
};

/** Running and waiting per DP rank, filled by the scan (index = `dp_rank`). */
type RankLoad = { running: number; waiting: number }[];

/** Ranks beyond this are not tracked (a label value that large is not a DP rank of one engine). */
const MAX_DP_RANKS = 1024;

/** Sum over the gauge's series (NaN and infinities included, so a broken series reads as unknown), and per rank. */
function sumGauge(page: Buffer, name: string, field: 'running' | 'waiting', ranks: RankLoad): { total: number; top: number } | undefined {
  let total = 0;
  let top = -1;
  let seen = 0;
  forEachSample(page, name, (value, rank) => {
    total += value;
    seen += 1;
    if (rank === NO_RANK || rank >= MAX_DP_RANKS || !Number.isFinite(value)) return;
    while (ranks.length <= rank) ranks.push({ running: 0, waiting: 0 });
    (ranks[rank] as { running: number; waiting: number })[field] += Math.max(0, value);
    if (rank > top) top = rank;
  });
  return seen > 0 ? { total, top } : undefined;
}

/** A ratio per rank: the pod's usage is the mean over its ranks (a sum of ratios means nothing, the last one is a guess). */
function meanGauge(page: Buffer, names: readonly string[]): number | undefined {
  for (const name of names) {
    let total = 0;
    let n = 0;
    forEachSample(page, name, (value) => {
      if (!Number.isFinite(value)) return;
      total += value;
      n += 1;
    });
    if (n > 0) return Math.min(1, Math.max(0, total / n));
  }
  return undefined;
}

const sampleNames = new Map<string, { sumName: string; countName: string }>();

/** `<name>_sum` and `<name>_count`, made once per histogram name rather than on every scrape. */
function histogramSampleNames(name: string): { sumName: string; countName: string } {
  let names = sampleNames.get(name);
  if (names === undefined) {
    names = { sumName: `${name}_sum`, countName: `${name}_count` };
    sampleNames.set(name, names);
  }
  return names;
}

/** `_sum` and `_count` totalled over the series of the first histogram of `names` that the page has with finite totals. */
function firstHistogram(page: Buffer, names: readonly string[]): HistogramTotals | undefined {
  for (const name of names) {
    const { sumName, countName } = histogramSampleNames(name);
    let sum = 0;
    let count = 0;
    let seen = 0;
    const countAt = forEachSample(page, countName, (v) => {
      count += v;
      seen += 1;
    });
    // `_sum` lines are in the same family block as `_count`: look from there (a page without `_count`: from the top).
    forEachSample(
      page,
      sumName,
      (v) => {
        sum += v;
        seen += 1;
      },
      countAt < 0 ? 0 : blockStartOf(page, countAt),
    );
    if (seen > 0 && Number.isFinite(sum) && Number.isFinite(count)) return { sum, count };
  }
  return undefined;
}

const finiteOrZero = (v: number | undefined): number => (v !== undefined && Number.isFinite(v) && v > 0 ? v : 0);

/**
 * Reads an engine's load from its Prometheus text. A response with none of the engine's gauges is an error (a
 * wrong `inferenceEngine`, a proxy's error page, SGLang without `--enable-metrics`), not an idle engine.
 */
export function readEngineLoad(
  engine: InferenceEngine,
  text: Buffer | string,
): { ok: true; load: EngineLoad } | { ok: false; error: string } {
  const names = ENGINE_METRIC_NAMES[engine];
  const page = typeof text === 'string' ? Buffer.from(text, 'utf8') : text;
  const ranks: RankLoad = [];
  const running = sumGauge(page, names.running, 'running', ranks);
  const waiting = sumGauge(page, names.waiting, 'waiting', ranks);
  const kvCacheUsage = meanGauge(page, names.kvUsage);
  if (running === undefined && waiting === undefined && kvCacheUsage === undefined) {
    return {
      ok: false,
      error: `no ${names.running}, ${names.waiting} or ${names.kvUsage[0]} in the /metrics response (is inferenceEngine ${engine} right?)`,
    };
  }
  // Per rank only when the series name more than one rank (rank 0 alone is the whole engine).
  const topRank = Math.max(running?.top ?? -1, waiting?.top ?? -1);
  return {
    ok: true,
    load: {
      running: finiteOrZero(running?.total),
      waiting: finiteOrZero(waiting?.total),
      kvCacheUsage: kvCacheUsage ?? 0,
      ttft: firstHistogram(page, names.ttft),
      tpot: firstHistogram(page, names.tpot),
      ...(topRank >= 1 ? { dpRanks: ranks } : {}),
    },
  };
}
