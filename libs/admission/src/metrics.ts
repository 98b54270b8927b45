import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

/**
 * Admission metrics. Kthena's names (`kthena_router_rate_limit_exceeded_total`, `kthena_router_fairness_queue_*`)
 * are kept with their labels so Kthena dashboards keep working; Triad's own series are `triad_admission_*`.
 * Registering twice on one registry (two admission instances in a test or benchmark) reuses the metric.
 */
export interface AdmissionMetrics {
  /** A no-op when the gateway counts `kthena_router_rate_limit_exceeded_total` itself. */
  readonly rateLimitExceeded: Pick<Counter<'model' | 'limit_type' | 'path'>, 'inc'>;
  readonly decisions: CounterBatch<'model' | 'result' | 'reason'>;
  readonly auth: CounterBatch<'method' | 'result'>;
  readonly tokenEstimates: CounterBatch<'method'>;
  readonly budgetPath: CounterBatch<'backend' | 'path'>;
  readonly storeErrors: Counter<'backend' | 'op'>;
  readonly failOpen: Counter<'backend'>;
  readonly configReloads: Counter<'source' | 'result'>;
  readonly queueSize: Gauge<'model' | 'user_id'>;
  readonly queueDuration: Histogram<'model' | 'user_id'>;
  readonly queueCancelled: Counter<'model' | 'user_id'>;
  readonly queueDequeued: CounterBatch<'model' | 'user_id'>;
  readonly queueInflight: Gauge<'model'>;
  /** Runs `hook` whenever the in-flight gauge is collected (the fair scheduler sets it then). Returns a remover. */
  onCollectInflight(hook: () => void): () => void;
}

/** Flush hooks of the batches feeding each counter, run by the counter's `collect` (at scrape time). */
const flushHooks = new WeakMap<object, Set<() => void>>();

/**
 * Counts for a counter that moves on every request. prom-client hashes the label set on each `inc`; here the
 * request path adds to a plain number under a cheap key, and the sums reach the counter when it is collected.
 */
class CounterBatch<L extends string> {
  readonly #counter: Counter<L>;
  readonly #labelNames: readonly L[];
  readonly #pending = new Map<string, { labels: Record<L, string>; n: number }>();
  readonly #flush = (): void => {
    for (const p of this.#pending.values()) {
      if (p.n > 0) this.#counter.inc(p.labels, p.n);
      p.n = 0;
    }
  };

  constructor(counter: Counter<L>, labelNames: readonly L[]) {
    this.#counter = counter;
    this.#labelNames = labelNames;
    flushHooks.get(counter)?.add(this.#flush);
  }

  inc(labels: Record<L, string>, n = 1): void {
    let key = '';
    for (const name of this.#labelNames) key += `${labels[name]}\u0001`;
    const hit = this.#pending.get(key);
    if (hit) hit.n += n;
    else this.#pending.set(key, { labels: { ...labels }, n });
  }

  /** Hands the remaining counts over and stops feeding the counter (the instance is closing). */
  detach(): void {
    this.#flush();
    flushHooks.get(this.#counter)?.delete(this.#flush);
  }
}

function batched<L extends string>(registry: Registry, name: string, help: string, labelNames: readonly L[]): CounterBatch<L> {
  let metric = registry.getSingleMetric(name) as Counter<L> | undefined;
  if (!metric) {
    const hooks = new Set<() => void>();
    metric = new Counter({ name, help, labelNames, registers: [registry], collect: () => hooks.forEach((h) => h()) });
    flushHooks.set(metric, hooks);
  }
  return new CounterBatch(metric, labelNames);
}

function counter<L extends string>(registry: Registry, name: string, help: string, labelNames: readonly L[]): Counter<L> {
  return (registry.getSingleMetric(name) as Counter<L> | undefined) ?? new Counter({ name, help, labelNames, registers: [registry] });
}

/** A gauge whose values are set by hooks when it is collected, instead of on every change. */
function collectedGauge<L extends string>(registry: Registry, name: string, help: string, labelNames: readonly L[]): Gauge<L> {
  let metric = registry.getSingleMetric(name) as Gauge<L> | undefined;
  if (!metric) {
    const hooks = new Set<() => void>();
    metric = new Gauge({ name, help, labelNames, registers: [registry], collect: () => hooks.forEach((h) => h()) });
    flushHooks.set(metric, hooks);
  }
  return metric;
}

function gauge<L extends string>(registry: Registry, name: string, help: string, labelNames: readonly L[]): Gauge<L> {
  return (registry.getSingleMetric(name) as Gauge<L> | undefined) ?? new Gauge({ name, help, labelNames, registers: [registry] });
}

/** Stops this instance's batches feeding the registry (after a last flush). */
export function detachAdmissionMetrics(metrics: AdmissionMetrics): void {
  for (const b of [metrics.decisions, metrics.auth, metrics.tokenEstimates, metrics.budgetPath, metrics.queueDequeued]) b.detach();
}

export function createAdmissionMetrics(registry: Registry, opts: { countRateLimitExceeded?: boolean } = {}): AdmissionMetrics {
  const queueInflight = collectedGauge(
    registry,
    'kthena_router_fairness_queue_inflight',
    'Requests admitted by the fairness queue and not yet released.',
    ['model'],
  );
  return {
    rateLimitExceeded:
      opts.countRateLimitExceeded === false
        ? { inc: () => undefined }
        : counter(registry, 'kthena_router_rate_limit_exceeded_total', 'Requests refused by a token rate limit.', [
            'model',
            'limit_type',
            'path',
          ]),
    decisions: batched(
      registry,
      'triad_admission_decisions_total',
      'Admission decisions by result (admitted, rejected, fail_open) and reason.',
      ['model', 'result', 'reason'],
    ),
    auth: batched(registry, 'triad_admission_auth_total', 'Authentication outcomes by method (api_key, jwt, none).', ['method', 'result']),
    tokenEstimates: batched(
      registry,
      'triad_admission_input_token_estimates_total',
      'Input token estimates by method (tiktoken_cl100k_base, tiktoken_o200k_base, hf_tokenizer, chars_div_4).',
      ['method'],
    ),
    budgetPath: batched(
      registry,
      'triad_admission_budget_path_total',
      'Rate-limit reservations served from the local lease (local) or with a store round-trip (store).',
      ['backend', 'path'],
    ),
    storeErrors: counter(registry, 'triad_admission_store_errors_total', 'Budget store operations that failed (unreachable, timeout).', [
      'backend',
      'op',
    ]),
    failOpen: counter(
      registry,
      'triad_admission_fail_open_total',
      'Requests admitted without a rate-limit check because the store was unreachable.',
      ['backend'],
    ),
    configReloads: counter(registry, 'triad_admission_config_reloads_total', 'Config and key file reloads by result (applied, rejected).', [
      'source',
      'result',
    ]),
    queueSize: gauge(registry, 'kthena_router_fairness_queue_size', 'Requests waiting in the fairness queue.', ['model', 'user_id']),
    queueDuration:
      (registry.getSingleMetric('kthena_router_fairness_queue_duration_seconds') as Histogram<'model' | 'user_id'> | undefined) ??
      new Histogram({
        name: 'kthena_router_fairness_queue_duration_seconds',
        help: 'Time requests waited in the fairness queue.',
        labelNames: ['model', 'user_id'],
        buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
        registers: [registry],
      }),
    queueCancelled: counter(
      registry,
      'kthena_router_fairness_queue_cancelled_total',
      'Queued requests that timed out or whose client went away.',
      ['model', 'user_id'],
    ),
    queueDequeued: batched(
      registry,
      'kthena_router_fairness_queue_dequeue_total',
      'Requests taken out of the fairness queue for processing.',
      ['model', 'user_id'],
    ),
    queueInflight,
    onCollectInflight: (hook) => {
      const hooks = flushHooks.get(queueInflight);
      hooks?.add(hook);
      return () => hooks?.delete(hook);
    },
  };
}
