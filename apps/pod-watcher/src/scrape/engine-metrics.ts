import type { InferenceEngine } from '@triad/crd';
import { histogramTotals, parsePrometheusText, sumSamples, type MetricFamily } from '@triad/prom-text';
import type { HistogramTotals } from './histogram-mean';

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

const FAMILY_FILTER: Readonly<Record<InferenceEngine, ReadonlySet<string>>> = {
  vLLM: familySet(ENGINE_METRIC_NAMES.vLLM),
  SGLang: familySet(ENGINE_METRIC_NAMES.SGLang),
};

function familySet(n: MetricNames): ReadonlySet<string> {
  return new Set([n.running, n.waiting, ...n.kvUsage, ...n.ttft, ...n.tpot]);
}

const FAMILY_LIST: Readonly<Record<InferenceEngine, readonly string[]>> = {
  vLLM: [...FAMILY_FILTER.vLLM],
  SGLang: [...FAMILY_FILTER.SGLang],
};

/**
 * The lines the parser needs: `# TYPE` lines and samples of the wanted families, without histogram buckets (only
 * `_sum` and `_count` are used). An engine page is ~300 lines and ~26 KB, scraped by the thousand every second;
 * finding the few wanted lines with `indexOf` (native string search) spares the parser nine lines in ten and
 * slices only the lines kept. TYPE lines come first so the parser knows each family before its samples.
 */
export function relevantLines(text: string, families: readonly string[]): string {
  const types: string[] = [];
  const samples: string[] = [];
  /** Line starts already kept (a family name that prefixes another must not count a line twice). */
  const taken = new Set<number>();
  const lineAt = (start: number) => {
    const end = text.indexOf('\n', start);
    return text.slice(start, end < 0 ? text.length : end);
  };
  for (const name of families) {
    const type = text.indexOf(`# TYPE ${name} `);
    if (type >= 0) types.push(lineAt(type));
    for (let at = text.startsWith(name) ? 0 : text.indexOf(`\n${name}`); at >= 0; at = text.indexOf(`\n${name}`, at + 1)) {
      const start = text.charCodeAt(at) === 10 ? at + 1 : at;
      const next = text.charCodeAt(start + name.length);
      // The family itself (followed by `{` or a space) or a suffixed sample other than `_bucket`.
      if ((next === 123 || next === 32 || (next === 95 && !text.startsWith('_bucket', start + name.length))) && !taken.has(start)) {
        taken.add(start);
        samples.push(lineAt(start));
      }
    }
  }
  return `${types.join('\n')}\n${samples.join('\n')}`;
}

type Families = ReadonlyMap<string, MetricFamily>;

/** A ratio per rank: the pod's usage is the mean over its ranks (a sum of ratios means nothing, the last one is a guess). */
function meanGauge(families: Families, names: readonly string[]): number | undefined {
  for (const name of names) {
    const fam = families.get(name);
    if (!fam) continue;
    let total = 0;
    let n = 0;
    for (const s of fam.samples) {
      if (s.name !== name || !Number.isFinite(s.value)) continue;
      total += s.value;
      n += 1;
    }
    if (n > 0) return Math.min(1, Math.max(0, total / n));
  }
  return undefined;
}

function firstHistogram(families: Families, names: readonly string[]): HistogramTotals | undefined {
  for (const name of names) {
    const h = histogramTotals(families, name);
    if (h && Number.isFinite(h.sum) && Number.isFinite(h.count)) return h;
  }
  return undefined;
}

const finiteOrZero = (v: number | undefined): number => (v !== undefined && Number.isFinite(v) && v > 0 ? v : 0);

/** Ranks beyond this are not tracked (a label value that large is not a DP rank of one engine). */
const MAX_DP_RANKS = 1024;

/** Adds a family's samples per `dp_rank` label into `out[rank][field]`; returns the highest rank seen, -1 if none. */
function addPerRank(families: Families, name: string, field: 'running' | 'waiting', out: { running: number; waiting: number }[]): number {
  const fam = families.get(name);
  let top = -1;
  if (!fam) return top;
  for (const s of fam.samples) {
    const label = s.labels['dp_rank'];
    if (s.name !== name || label === undefined || !/^\d{1,4}$/.test(label) || !Number.isFinite(s.value)) continue;
    const rank = Number(label);
    if (rank >= MAX_DP_RANKS) continue;
    while (out.length <= rank) out.push({ running: 0, waiting: 0 });
    (out[rank] as { running: number; waiting: number })[field] += Math.max(0, s.value);
    if (rank > top) top = rank;
  }
  return top;
}

/** Running and waiting per DP rank, or undefined when the engine reports one rank (or no `dp_rank` label). */
function perRankLoad(families: Families, names: MetricNames): { running: number; waiting: number }[] | undefined {
  const out: { running: number; waiting: number }[] = [];
  const top = Math.max(addPerRank(families, names.running, 'running', out), addPerRank(families, names.waiting, 'waiting', out));
  return top >= 1 ? out : undefined;
}

/**
 * Reads an engine's load from its Prometheus text. A response with none of the engine's gauges is an error (a
 * wrong `inferenceEngine`, a proxy's error page, SGLang without `--enable-metrics`), not an idle engine.
 */
export function readEngineLoad(engine: InferenceEngine, text: string): { ok: true; load: EngineLoad } | { ok: false; error: string } {
  const names = ENGINE_METRIC_NAMES[engine];
  const { families } = parsePrometheusText(relevantLines(text, FAMILY_LIST[engine]), { families: FAMILY_FILTER[engine] });
  const running = sumSamples(families, names.running);
  const waiting = sumSamples(families, names.waiting);
  const kvCacheUsage = meanGauge(families, names.kvUsage);
  const ranks = perRankLoad(families, names);
  if (running === undefined && waiting === undefined && kvCacheUsage === undefined) {
    return {
      ok: false,
      error: `no ${names.running}, ${names.waiting} or ${names.kvUsage[0]} in the /metrics response (is inferenceEngine ${engine} right?)`,
    };
  }
  return {
    ok: true,
    load: {
      running: finiteOrZero(running),
      waiting: finiteOrZero(waiting),
      kvCacheUsage: kvCacheUsage ?? 0,
      ttft: firstHistogram(families, names.ttft),
      tpot: firstHistogram(families, names.tpot),
      ...(ranks === undefined ? {} : { dpRanks: ranks }),
    },
  };
}
