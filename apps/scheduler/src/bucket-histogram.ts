import type { Registry } from 'prom-client';

/** One label value's counts. */
interface Series {
  readonly labels: Readonly<Record<string, string>>;
  /** Observations per bucket (not cumulative), one per upper bound. */
  readonly counts: Float64Array;
  sum: number;
  count: number;
}

/** What `observe` needs of a series: the handle a caller keeps per label value. */
export interface HistogramChild {
  observe(value: number): void;
}

/**
 * A Prometheus histogram with at most one label, exposed exactly as prom-client's `Histogram` exposes the same
 * observations (`bucket-histogram.test.ts` holds the two side by side), whose `observe` costs a bucket search and
 * three additions. prom-client's validates the labels, hashes them and finds the bucket through an object keyed by
 * the bound's decimal string on every call: per decision, that was most of what the scheduler's metrics cost.
 */
export class BucketHistogram implements HistogramChild {
  readonly name: string;
  readonly help: string;
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  readonly #bounds: Float64Array;
  readonly #label: string | undefined;
  readonly #series = new Map<string, Series>();
  /** The series of a histogram without a label (shown with zero counts from its creation, as prom-client does). */
  #unlabelled: Series | undefined;

  constructor(options: { name: string; help: string; buckets: readonly number[]; label?: string; registers: readonly Registry[] }) {
    this.name = options.name;
    this.help = options.help;
    this.#bounds = Float64Array.from([...options.buckets].sort((a, b) => a - b));
    this.#label = options.label;
    // prom-client shows a histogram without a label with zero counts from its creation.
    if (this.#label === undefined) this.#createUnlabelled();
    for (const registry of options.registers) registry.registerMetric(this as never);
  }

  /** Observes into the histogram without a label. */
  observe(value: number): void {
    if (this.#label !== undefined) throw new Error(`${this.name} has a label: observe through child(value)`);
    this.#add(this.#unlabelled ?? this.#createUnlabelled(), value);
  }

  /** The series of one label value, to keep and observe into. */
  child(value: string): HistogramChild {
    const label = this.#label;
    if (label === undefined) throw new Error(`${this.name} has no label`);
    return {
      observe: (v: number): void => {
        let series = this.#series.get(value);
        if (series === undefined) {
          series = { labels: { [label]: value }, counts: new Float64Array(this.#bounds.length), sum: 0, count: 0 };
          this.#series.set(value, series);
        }
        this.#add(series, v);
      },
    };
  }

  #add(series: Series, value: number): void {
    if (!Number.isFinite(value)) throw new TypeError(`Value is not a valid number: ${value}`);
    const bounds = this.#bounds;
    for (let i = 0; i < bounds.length; i++) {
      if (value <= bounds[i]) {
        series.counts[i]++;
        break;
      }
    }
    series.sum += value;
    series.count++;
  }

  /** The series of the histogram without a label. */
  #createUnlabelled(): Series {
    const series: Series = { labels: {}, counts: new Float64Array(this.#bounds.length), sum: 0, count: 0 };
    this.#unlabelled = series;
    this.#series.set('', series);
    return series;
  }

  /** Forgets every series (as prom-client's reset: a histogram without a label shows nothing until observed again). */
  reset(): void {
    this.#series.clear();
    this.#unlabelled = undefined;
  }

  /** The registry's view (prom-client's metric object: cumulative buckets, `+Inf`, sum and count per series). */
  get(): Promise<{
    name: string;
    help: string;
    type: string;
    aggregator: string;
    values: { labels: Record<string, string | number>; value: number; metricName: string }[];
  }> {
    const values: { labels: Record<string, string | number>; value: number; metricName: string }[] = [];
    const bucket = `${this.name}_bucket`;
    for (const s of this.#series.values()) {
      let cumulative = 0;
      for (let i = 0; i < this.#bounds.length; i++) {
        cumulative += s.counts[i];
        values.push({ labels: { le: this.#bounds[i], ...s.labels }, value: cumulative, metricName: bucket });
      }
      values.push({ labels: { le: '+Inf', ...s.labels }, value: s.count, metricName: bucket });
      values.push({ labels: { ...s.labels }, value: s.sum, metricName: `${this.name}_sum` });
      values.push({ labels: { ...s.labels }, value: s.count, metricName: `${this.name}_count` });
    }
    return Promise.resolve({ name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values });
  }
}
