/**
 * A small Prometheus registry that writes text exposition 0.0.4 the way Python's prometheus_client does (which is
 * what vLLM and SGLang use): counters are typed and named with their `_total` suffix, numbers print as `1.0`,
 * histograms have cumulative `_bucket{le}`, `_sum` and `_count`. Series are created once at start-up so the hot
 * path only adds numbers; gauges may read their value from a callback at scrape time.
 */

export type Labels = Readonly<Record<string, string>>;

/** Formats a number as Python's prometheus_client does (floats always carry a decimal point). */
export function formatValue(v: number): string {
  if (v === Infinity) return '+Inf';
  if (v === -Infinity) return '-Inf';
  if (Number.isNaN(v)) return 'NaN';
  return Number.isInteger(v) ? v.toFixed(1) : String(v);
}

function escapeLabel(v: string): string {
  return v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
}

function labelText(labels: Labels, extra?: string): string {
  const parts = Object.entries(labels).map(([k, v]) => `${k}="${escapeLabel(v)}"`);
  if (extra) parts.push(extra);
  return parts.length === 0 ? '' : `{${parts.join(',')}}`;
}

export class CounterSeries {
  value = 0;
  constructor(readonly labels: Labels) {}
  inc(by = 1): void {
    this.value += by;
  }
}

export class GaugeSeries {
  value = 0;
  constructor(
    readonly labels: Labels,
    readonly read?: () => number,
  ) {}
  set(v: number): void {
    this.value = v;
  }
  current(): number {
    return this.read ? this.read() : this.value;
  }
}

export class HistogramSeries {
  /** Per-bucket (non-cumulative) counts; the last slot is +Inf. */
  readonly counts: Float64Array;
  sum = 0;
  count = 0;
  constructor(
    readonly labels: Labels,
    readonly buckets: readonly number[],
  ) {
    this.counts = new Float64Array(buckets.length + 1);
  }
  observe(v: number): void {
    this.observeMany(v, 1);
  }
  /** Records `n` observations of the same value (a request's mean inter-token latency, for example). */
  observeMany(v: number, n: number): void {
    if (n <= 0) return;
    let i = 0;
    while (i < this.buckets.length && v > this.buckets[i]) i++;
    this.counts[i] = this.counts[i] + n;
    this.sum += v * n;
    this.count += n;
  }
}

interface Family {
  readonly name: string;
  readonly help: string;
  readonly type: 'counter' | 'gauge' | 'histogram';
  readonly series: (CounterSeries | GaugeSeries | HistogramSeries)[];
}

/** The metric families of one simulated engine, in registration order. */
export class MetricRegistry {
  readonly #families: Family[] = [];

  #family(name: string, help: string, type: Family['type']): Family {
    let fam = this.#families.find((f) => f.name === name);
    if (!fam) {
      fam = { name, help, type, series: [] };
      this.#families.push(fam);
    }
    return fam;
  }

  /** `name` is the exposed name including `_total`, as prometheus_client prints it. */
  counter(name: string, help: string, labels: Labels): CounterSeries {
    const s = new CounterSeries(labels);
    this.#family(name, help, 'counter').series.push(s);
    return s;
  }

  gauge(name: string, help: string, labels: Labels, read?: () => number): GaugeSeries {
    const s = new GaugeSeries(labels, read);
    this.#family(name, help, 'gauge').series.push(s);
    return s;
  }

  histogram(name: string, help: string, labels: Labels, buckets: readonly number[]): HistogramSeries {
    const s = new HistogramSeries(labels, buckets);
    this.#family(name, help, 'histogram').series.push(s);
    return s;
  }

  render(): string {
    let out = '';
    for (const fam of this.#families) {
      out += `# HELP ${fam.name} ${fam.help}\n# TYPE ${fam.name} ${fam.type}\n`;
      for (const s of fam.series) {
        if (s instanceof HistogramSeries) out += renderHistogram(fam.name, s);
        else if (s instanceof GaugeSeries) out += `${fam.name}${labelText(s.labels)} ${formatValue(s.current())}\n`;
        else out += `${fam.name}${labelText(s.labels)} ${formatValue(s.value)}\n`;
      }
    }
    return out;
  }
}

function renderHistogram(name: string, s: HistogramSeries): string {
  let out = '';
  let cumulative = 0;
  for (let i = 0; i <= s.buckets.length; i++) {
    cumulative += s.counts[i];
    const le = i < s.buckets.length ? formatValue(s.buckets[i]) : '+Inf';
    out += `${name}_bucket${labelText(s.labels, `le="${le}"`)} ${formatValue(cumulative)}\n`;
  }
  out += `${name}_count${labelText(s.labels)} ${formatValue(s.count)}\n`;
  out += `${name}_sum${labelText(s.labels)} ${formatValue(s.sum)}\n`;
  return out;
}

/**
 * The simulator's own gauges of KV held for a peer engine (not a vLLM or SGLang metric; tests and benchmarks read
 * them to see KV a failed or abandoned hand-off left behind).
 */
export function registerHeldKv(registry: MetricRegistry, model: string, read: () => { requests: number; blocks: number }): void {
  const labels = { model_name: model };
  registry.gauge(
    'triad_sim_kv_held_requests',
    'Simulator: requests whose KV is held for a peer engine that has not taken it',
    labels,
    () => read().requests,
  );
  registry.gauge(
    'triad_sim_kv_held_blocks',
    'Simulator: KV blocks held for a peer engine that has not taken them',
    labels,
    () => read().blocks,
  );
}
