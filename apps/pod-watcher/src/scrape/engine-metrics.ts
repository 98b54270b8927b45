import type { InferenceEngine } from '@triad/crd';
import type { HistogramTotals } from './histogram-mean';
import { NO_RANK, blockStartOf, forEachSample, type SampleSink } from './sample-scan';

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

/*
 * The sinks below are kept and reset for each page rather than made per page: reading a page is synchronous,
 * so one of each serves every scrape of the process.
 */

/** Sums a gauge over its series (NaN and infinities included, so a broken series reads as unknown), and per rank. */
class GaugeSum implements SampleSink {
  total = 0;
  seen = 0;
  /** Highest rank seen (-1: none). */
  top = -1;
  ranks: RankLoad | undefined;
  field: 'running' | 'waiting' = 'running';

  reset(field: 'running' | 'waiting', ranks: RankLoad | undefined): this {
    this.total = 0;
    this.seen = 0;
    this.top = -1;
    this.field = field;
    this.ranks = ranks;
    return this;
  }

  add(value: number, rank: number): void {
    this.total += value;
    this.seen += 1;
    if (rank === NO_RANK || rank >= MAX_DP_RANKS || !Number.isFinite(value)) return;
    const ranks = (this.ranks ??= []);
    while (ranks.length <= rank) ranks.push({ running: 0, waiting: 0 });
    ranks[rank][this.field] += Math.max(0, value);
    if (rank > this.top) this.top = rank;
  }
}

/** Sums a series: a histogram's `_sum` or `_count` as they come, a ratio's finite values only (for its mean). */
class Total implements SampleSink {
  total = 0;
  seen = 0;
  readonly #finiteOnly: boolean;

  constructor(finiteOnly: boolean) {
    this.#finiteOnly = finiteOnly;
  }

  reset(): this {
    this.total = 0;
    this.seen = 0;
    return this;
  }

  add(value: number): void {
    if (this.#finiteOnly && !Number.isFinite(value)) return;
    this.total += value;
    this.seen += 1;
  }
}

const gauge = new GaugeSum();
const ratio = new Total(true);
const sums = new Total(false);
const counts = new Total(false);

function meanGauge(page: Buffer, names: readonly string[]): number | undefined {
  for (const name of names) {
    // The pod's usage is the mean over its ranks: a sum of ratios means nothing.
    forEachSample(page, name, ratio.reset());
    if (ratio.seen > 0) return Math.min(1, Math.max(0, ratio.total / ratio.seen));
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
    const countAt = forEachSample(page, countName, counts.reset());
    // `_sum` lines are in the same family block as `_count`: look from there (a page without `_count`: from the top).
    forEachSample(page, sumName, sums.reset(), countAt < 0 ? 0 : blockStartOf(page, countAt));
    const sum = sums.total;
    const count = counts.total;
    if (sums.seen + counts.seen > 0 && Number.isFinite(sum) && Number.isFinite(count)) return { sum, count };
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
  forEachSample(page, names.running, gauge.reset('running', undefined));
  const running = gauge.seen > 0 ? gauge.total : undefined;
  let topRank = gauge.top;
  forEachSample(page, names.waiting, gauge.reset('waiting', gauge.ranks));
  const waiting = gauge.seen > 0 ? gauge.total : undefined;
  topRank = Math.max(topRank, gauge.top);
  const ranks = gauge.ranks;
  gauge.ranks = undefined;
  const kvCacheUsage = meanGauge(page, names.kvUsage);
  if (running === undefined && waiting === undefined && kvCacheUsage === undefined) {
    return {
      ok: false,
      error: `no ${names.running}, ${names.waiting} or ${names.kvUsage[0]} in the /metrics response (is inferenceEngine ${engine} right?)`,
    };
  }
  const load: { -readonly [K in keyof EngineLoad]: EngineLoad[K] } = {
    running: finiteOrZero(running),
    waiting: finiteOrZero(waiting),
    kvCacheUsage: kvCacheUsage ?? 0,
    ttft: firstHistogram(page, names.ttft),
    tpot: firstHistogram(page, names.tpot),
  };
  // Per rank only when the series name more than one rank (rank 0 alone is the whole engine).
  if (topRank >= 1 && ranks !== undefined) load.dpRanks = ranks;
  return { ok: true, load };
}
