import type { Registry } from 'prom-client';

/**
 * Counters, gauges and histograms for the per-request hot path. prom-client validates and hashes the label set
 * on every `inc`/`observe`, even through a `labels()` child, which at EPD rates was several percent of the
 * gateway's CPU; these keep one plain object per label set (created once, then held by the caller), so an
 * update is a few arithmetic operations. They register in a prom-client Registry and export the same values
 * prom-client would (same label order, cumulative `le` buckets, `_sum`, `_count`), rendered by the registry.
 */

type Labels = Record<string, string>;

interface MetricValue {
  readonly value: number;
  readonly labels: Labels;
  readonly metricName?: string;
  readonly sharedLabels?: Labels;
}

interface MetricData {
  readonly name: string;
  readonly help: string;
  readonly type: 'counter' | 'gauge' | 'histogram';
  readonly values: MetricValue[];
  readonly aggregator: 'sum';
}

interface Config {
  readonly name: string;
  readonly help: string;
  readonly labelNames?: readonly string[];
  readonly registers: readonly Registry[];
}

abstract class FastMetric<C> {
  readonly name: string;
  readonly help: string;
  readonly aggregator = 'sum' as const;
  abstract readonly type: MetricData['type'];
  readonly #labelNames: readonly string[];
  readonly #children = new Map<string, C>();

  constructor(config: Config) {
    this.name = config.name;
    this.help = config.help;
    this.#labelNames = config.labelNames ?? [];
    // The registry only needs name, help, type, get() and reset() (prom-client's Metric shape).
    for (const r of config.registers) r.registerMetric(this as unknown as Parameters<Registry['registerMetric']>[0]);
  }

  protected abstract create(labels: Labels): C;

  /** The child for these label values (in `labelNames` order), created on first use; hold on to it. */
  labels(...values: string[]): C {
    const key = values.length === 1 ? values[0] : values.join('\u0000');
    let child = this.#children.get(key);
    if (child === undefined) {
      const labels: Labels = {};
      for (let i = 0; i < this.#labelNames.length; i++) labels[this.#labelNames[i]] = values[i] ?? '';
      child = this.create(labels);
      this.#children.set(key, child);
    }
    return child;
  }

  /** Unlabelled metrics always export (as prom-client's do); labelled ones once a child was updated. */
  protected get unlabelled(): boolean {
    return this.#labelNames.length === 0;
  }

  protected children(): IterableIterator<C> {
    return this.#children.values();
  }

  /** Zeroes every label set in place (children held by callers stay live), as a fresh metric would read. */
  reset(): void {
    for (const c of this.#children.values()) this.zero(c);
  }

  protected abstract zero(child: C): void;

  protected abstract values(): MetricValue[];

  async get(): Promise<MetricData> {
    return { name: this.name, help: this.help, type: this.type, values: this.values(), aggregator: this.aggregator };
  }
}

/** One label set of a FastCounter: a value that only goes up. */
export class CounterChild {
  value = 0;
  /** Updated since creation or reset: prom-client exports a labelled child only once it was used. */
  used = false;
  constructor(readonly labels: Labels) {}

  inc(n = 1): void {
    this.value += n;
    this.used = true;
  }
}

/** One label set of a FastGauge: a counter that may also go down or be set. */
export class GaugeChild extends CounterChild {
  dec(n = 1): void {
    this.value -= n;
    this.used = true;
  }

  set(v: number): void {
    this.value = v;
    this.used = true;
  }
}

/** A metric of one number per label set (counters and gauges export alike). */
abstract class FastScalar<C extends CounterChild> extends FastMetric<C> {
  constructor(config: Config) {
    super(config);
    if (this.unlabelled) this.labels();
  }

  protected zero(c: C): void {
    c.value = 0;
    c.used = false;
  }

  protected values(): MetricValue[] {
    const out: MetricValue[] = [];
    for (const c of this.children()) if (c.used || this.unlabelled) out.push({ value: c.value, labels: c.labels });
    return out;
  }
}

export class FastCounter extends FastScalar<CounterChild> {
  readonly type = 'counter' as const;

  protected create(labels: Labels): CounterChild {
    return new CounterChild(labels);
  }
}

export class FastGauge extends FastScalar<GaugeChild> {
  readonly type = 'gauge' as const;

  protected create(labels: Labels): GaugeChild {
    return new GaugeChild(labels);
  }
}

/** One label set of a FastHistogram: per-bucket counts (not cumulative), sum and count. */
export class HistogramChild {
  readonly counts: Float64Array;
  sum = 0;
  count = 0;
  readonly #bounds: readonly number[];

  constructor(
    readonly labels: Labels,
    bounds: readonly number[],
  ) {
    this.#bounds = bounds;
    this.counts = new Float64Array(bounds.length);
  }

  observe(v: number): void {
    if (!Number.isFinite(v)) return;
    const bounds = this.#bounds;
    for (let i = 0; i < bounds.length; i++) {
      if (v <= bounds[i]) {
        this.counts[i] += 1;
        break;
      }
    }
    this.sum += v;
    this.count += 1;
  }
}

export class FastHistogram extends FastMetric<HistogramChild> {
  readonly type = 'histogram' as const;
  readonly #bounds: readonly number[];

  constructor(config: Config & { readonly buckets: readonly number[] }) {
    super(config);
    this.#bounds = [...config.buckets].sort((a, b) => a - b);
    if (this.unlabelled) this.labels();
  }

  /** prom-client exports an unlabelled histogram's zeros from creation, but not after a reset. */
  #exportEmpty = true;

  protected create(labels: Labels): HistogramChild {
    return new HistogramChild(labels, this.#bounds);
  }

  protected zero(c: HistogramChild): void {
    c.counts.fill(0);
    c.sum = 0;
    c.count = 0;
    this.#exportEmpty = false;
  }

  protected values(): MetricValue[] {
    const out: MetricValue[] = [];
    const bucket = `${this.name}_bucket`;
    for (const c of this.children()) {
      if (c.count === 0 && !(this.unlabelled && this.#exportEmpty)) continue;
      let acc = 0;
      for (let i = 0; i < this.#bounds.length; i++) {
        acc += c.counts[i];
        out.push({ labels: { le: this.#bounds[i] as unknown as string }, sharedLabels: c.labels, value: acc, metricName: bucket });
      }
      out.push({ labels: { le: '+Inf' }, sharedLabels: c.labels, value: c.count, metricName: bucket });
      out.push({ labels: {}, sharedLabels: c.labels, value: c.sum, metricName: `${this.name}_sum` });
      out.push({ labels: {}, sharedLabels: c.labels, value: c.count, metricName: `${this.name}_count` });
    }
    return out;
  }
}
