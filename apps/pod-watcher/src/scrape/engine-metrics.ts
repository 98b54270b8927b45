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

const TYPE_LINE = Buffer.from('\n# TYPE ');
const TYPE_PREFIX = TYPE_LINE.subarray(1);
const COMMENT_LINE = Buffer.from('\n#');
const NEWLINE = 10;

/**
 * The lines the parser needs: `# TYPE` lines and samples of the wanted families, without histogram buckets (only
 * `_sum` and `_count` are used). An engine page is ~300 lines and ~26 KB, scraped by the thousand every second.
 * The text format groups a family's samples under its `# TYPE` line, so this hops from TYPE line to TYPE line
 * (native search) and reads lines only inside the wanted families' blocks, skipping their buckets; untyped
 * samples are looked for before the first TYPE line (all of a page without any). TYPE lines come first so the
 * parser knows each family before its samples. It reads the answer's bytes: only the kept lines become strings,
 * never the whole page (26 KB of heap per scrape, thousands of times a second, is what filled the old space).
 */
export function relevantLines(page: Buffer | string, families: readonly string[]): string {
  const buf = typeof page === 'string' ? Buffer.from(page, 'utf8') : page;
  const wanted = familyLookup(families);
  const types: string[] = [];
  const samples: string[] = [];
  let at = startsWithAt(buf, TYPE_PREFIX, 0) ? 0 : buf.indexOf(TYPE_LINE);
  if (at < 0) return `\n${linesByName(buf, 0, buf.length, wanted).join('\n')}`;
  // Untyped samples before the first TYPE line.
  if (at > 0) samples.push(...linesByName(buf, 0, at, wanted));
  while (at >= 0) {
    const start = buf[at] === NEWLINE ? at + 1 : at;
    let lineEnd = buf.indexOf(NEWLINE, start);
    if (lineEnd < 0) lineEnd = buf.length;
    const nameEnd = buf.indexOf(32, start + 7);
    const name = nameEnd > 0 && nameEnd < lineEnd ? buf.toString('latin1', start + 7, nameEnd) : '';
    // The block: up to the next comment line (HELP and TYPE of the next family).
    let blockEnd = buf.indexOf(COMMENT_LINE, lineEnd);
    if (blockEnd < 0) blockEnd = buf.length;
    if (wanted.has(name)) {
      types.push(buf.toString('utf8', start, lineEnd));
      const bucket = wanted.bucketOf(name);
      for (let ls = lineEnd + 1; ls < blockEnd;) {
        let le = buf.indexOf(NEWLINE, ls);
        if (le < 0 || le > blockEnd) le = blockEnd;
        if (!startsWithAt(buf, bucket, ls) && le > ls) keepSample(buf, ls, le, wanted, samples);
        ls = le + 1;
      }
    }
    at = buf.indexOf(TYPE_LINE, blockEnd - 1 < lineEnd ? lineEnd : blockEnd - 1);
  }
  return `${types.join('\n')}\n${samples.join('\n')}`;
}

function startsWithAt(buf: Buffer, prefix: Buffer, at: number): boolean {
  return at + prefix.length <= buf.length && buf.compare(prefix, 0, prefix.length, at, at + prefix.length) === 0;
}

/** Keeps the line [start, end) when its metric name (up to `{` or a space) is a wanted sample. */
function keepSample(buf: Buffer, start: number, end: number, wanted: FamilyLookup, out: string[]): void {
  let nameEnd = start;
  for (; nameEnd < end; nameEnd++) {
    const ch = buf[nameEnd];
    if (ch === 123 || ch === 32) break;
  }
  if (nameEnd < end && wanted.keeps(buf.toString('latin1', start, nameEnd))) out.push(buf.toString('utf8', start, end));
}

/** The wanted samples among the lines of buf[from, to), every line's name read. */
function linesByName(buf: Buffer, from: number, to: number, wanted: FamilyLookup): string[] {
  const samples: string[] = [];
  for (let start = from; start < to;) {
    let end = buf.indexOf(NEWLINE, start);
    if (end < 0 || end > to) end = to;
    if (wanted.firstChars.has(buf[start] as number)) keepSample(buf, start, end, wanted, samples);
    start = end + 1;
  }
  return samples;
}

interface FamilyLookup {
  has(name: string): boolean;
  /** `<family>_bucket` as bytes for a wanted family, the prefix of the lines its block skips. */
  bucketOf(name: string): Buffer;
  /** A sample of a wanted family: the family itself or a suffixed sample (`_sum`, `_count`, …) other than `_bucket`. */
  keeps(sampleName: string): boolean;
  readonly firstChars: ReadonlySet<number>;
}

const lookups = new WeakMap<readonly string[], FamilyLookup>();

function familyLookup(families: readonly string[]): FamilyLookup {
  let hit = lookups.get(families);
  if (hit) return hit;
  const set = new Set(families);
  const buckets = new Map(families.map((f) => [f, Buffer.from(`${f}_bucket`)]));
  hit = {
    has: (name) => set.has(name),
    bucketOf: (name) => buckets.get(name) as Buffer,
    keeps: (name) => {
      if (set.has(name)) return true;
      if (name.endsWith('_bucket')) return false;
      for (let at = name.lastIndexOf('_'); at > 0; at = name.lastIndexOf('_', at - 1)) if (set.has(name.slice(0, at))) return true;
      return false;
    },
    firstChars: new Set(families.map((f) => f.charCodeAt(0))),
  };
  lookups.set(families, hit);
  return hit;
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
export function readEngineLoad(
  engine: InferenceEngine,
  text: Buffer | string,
): { ok: true; load: EngineLoad } | { ok: false; error: string } {
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
