import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { EndpointIndex, InflightTracker, KeyAgreement, PickVerdict, SchedulingObserver } from '@triad/scheduling';
import { BucketHistogram } from './bucket-histogram';
import { PickTally } from './state/pick-tally';

/** Decision latency buckets (seconds): scheduling takes tens of microseconds to a few milliseconds. */
const LATENCY_BUCKETS = [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1];

/**
 * A counter whose value is a running total kept elsewhere (read at scrape time): exported as a counter named
 * `_total`, so `rate()` and `increase()` apply and a restart reads as a counter reset.
 */
function runningTotal(registry: Registry, name: string, help: string, read: () => number): void {
  new Counter({
    name,
    help: `${help} (since the process started)`,
    registers: [registry],
    collect() {
      this.reset();
      this.inc(read());
    },
  });
}

/** The scheduler's Prometheus metrics, in their own registry (served on the ops port). */
export class SchedulerMetrics implements SchedulingObserver {
  readonly registry = new Registry();
  /**
   * Decisions by mode, then outcome, counted here and handed to `decisions` at scrape time: a prom-client child's
   * `inc` hashes its labels on every call (about 2 k instructions per decision).
   */
  readonly #decided = new Map<string, Map<string, { n: number }>>();
  readonly decisions = new Counter({
    name: 'triad_scheduler_decisions_total',
    help: 'Scheduling decisions by pipeline mode and outcome (ok or error code)',
    labelNames: ['mode', 'outcome'] as const,
    registers: [this.registry],
    collect: () => this.#flushDecisions(),
  });
  readonly errors = new Counter({
    name: 'triad_scheduler_errors_total',
    help: 'Failed scheduling requests by error code',
    labelNames: ['code'] as const,
    registers: [this.registry],
  });
  // Observed once per decision and once per batch: BucketHistogram, exposed as prom-client's, at a fraction of the cost.
  readonly latency = new BucketHistogram({
    name: 'triad_scheduler_decision_duration_seconds',
    help: 'Time to decide one request, by pipeline mode',
    label: 'mode',
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });
  readonly batchSize = new BucketHistogram({
    name: 'triad_scheduler_batch_size',
    help: 'Scheduling requests per triad.v1.schedule message',
    buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256],
    registers: [this.registry],
  });
  // Plugin timings arrive ~10 to 60 times per timed decision (a sample, DecideObserver): they are summed in plain maps (kind → plugin, so no key
  // string is built per call) and handed to the counters at scrape time, which keeps label hashing off the hot path.
  readonly #pluginPending = new Map<string, Map<string, { plugin: string; kind: string; seconds: number; calls: number }>>();
  readonly pluginSeconds = new Counter({
    name: 'triad_scheduler_plugin_seconds_total',
    help: 'Time spent in each plugin (estimated from a sample of the decisions, one in 8 by default)',
    labelNames: ['plugin', 'kind'] as const,
    registers: [this.registry],
    collect: () => this.#flushPluginTimes(),
  });
  readonly pluginCalls = new Counter({
    name: 'triad_scheduler_plugin_calls_total',
    help: 'Calls of each plugin (estimated from a sample of the decisions, one in 8 by default)',
    labelNames: ['plugin', 'kind'] as const,
    registers: [this.registry],
  });
  readonly kvLag = new Histogram({
    name: 'triad_scheduler_kv_index_lag_seconds',
    help: "From an engine KV-event batch to its delta applied to this replica's index",
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5],
    registers: [this.registry],
  });
  readonly configReloads = new Counter({
    name: 'triad_scheduler_config_reloads_total',
    help: 'Config loads by source (file, kv) and result (applied, rejected, unchanged)',
    labelNames: ['source', 'result'] as const,
    registers: [this.registry],
  });

  /** Pick verdicts since the start (the two counters below and `/debug/pick-quality` read it). */
  readonly picks = new PickTally();

  constructor() {
    const tally = this.picks;
    const exportCounts = (
      counter: Counter<'profile' | 'scorer'> | Counter<'profile' | 'scorer' | 'reason'>,
      counts: PickTally['decider'],
      extra: Record<string, string>,
    ) => {
      counter.reset();
      for (const [profile, byScorer] of counts) for (const [scorer, n] of byScorer) counter.inc({ profile, scorer, ...extra }, n);
    };
    new Counter({
      name: 'triad_scheduler_pick_decider_total',
      help: 'Profile picks by what decided the first choice: the scorer with the largest weighted lead over the runner-up, tie-break, only-candidate, or an affinity picker (since the process started)',
      labelNames: ['profile', 'scorer'] as const,
      registers: [this.registry],
      collect() {
        exportCounts(this, tally.decider, {});
      },
    });
    new Counter({
      name: 'triad_scheduler_affinity_overruled_total',
      help: "Profile picks where an affinity scorer's choice was overruled: its load bound took its score from the endpoint holding the content, and the pick went elsewhere (since the process started)",
      labelNames: ['profile', 'scorer', 'reason'] as const,
      registers: [this.registry],
      collect() {
        exportCounts(this, tally.overruled, { reason: 'load' });
      },
    });
  }

  picked(verdicts: readonly PickVerdict[]): void {
    this.picks.add(verdicts);
  }

  /** Gauges read from the live state at scrape time. */
  watch(index: EndpointIndex, tracker: InflightTracker, rejectedMessages: () => number): void {
    new Gauge({
      name: 'triad_scheduler_endpoints',
      help: 'Ready endpoints in the index by role',
      labelNames: ['role'] as const,
      registers: [this.registry],
      collect() {
        for (const [role, n] of Object.entries(index.countByRole())) this.set({ role }, n);
      },
    });
    new Gauge({
      name: 'triad_scheduler_endpoints_without_metrics',
      help: 'Ready endpoints never scraped or whose scrapes fail (stale-metrics drops them while others have metrics)',
      registers: [this.registry],
      collect() {
        this.set(index.countWithoutMetrics());
      },
    });
    new Gauge({
      name: 'triad_scheduler_modelservers',
      help: 'ModelServer records in the index',
      registers: [this.registry],
      collect() {
        this.set(index.modelServerCount);
      },
    });
    new Gauge({
      name: 'triad_scheduler_dispatch_gateways',
      help: 'Gateways whose in-flight counts are held',
      registers: [this.registry],
      collect() {
        this.set(tracker.stats.gateways);
      },
    });
    runningTotal(
      this.registry,
      'triad_scheduler_dispatch_gaps_total',
      'Dispatch batches that skipped sequence numbers',
      () => tracker.stats.gaps,
    );
    runningTotal(
      this.registry,
      'triad_scheduler_dispatch_expired_gateways_total',
      'Gateways dropped for missing snapshots',
      () => tracker.stats.expired,
    );
    runningTotal(this.registry, 'triad_scheduler_rejected_messages_total', 'Invalid NATS messages and KV values dropped', rejectedMessages);
  }

  /** `ms` spent in `calls` calls of a plugin (default 1; the observer's sampled calls stand for more). */
  pluginTime(plugin: string, kind: 'filter' | 'scorer' | 'picker' | 'post-schedule', ms: number, calls = 1): void {
    let byPlugin = this.#pluginPending.get(kind);
    if (!byPlugin) this.#pluginPending.set(kind, (byPlugin = new Map()));
    const entry = byPlugin.get(plugin);
    if (entry) {
      entry.seconds += ms / 1000;
      entry.calls += calls;
    } else {
      byPlugin.set(plugin, { plugin, kind, seconds: ms / 1000, calls });
    }
  }

  /**
   * `triad_scheduler_kv_key_agreement_keys_total{model_server,result}`: the gateway's block keys for each
   * ModelServer's requests (`computed`) and those an engine reported holding (`matched`); matched/computed is the
   * share of keys that are the engines' own.
   */
  watchKeyAgreement(agreement: KeyAgreement): void {
    const exported = new Map<string, { computed: number; matched: number }>();
    new Counter({
      name: 'triad_scheduler_kv_key_agreement_keys_total',
      help: 'Block keys of precise-prefix-cache requests per ModelServer: computed by the gateway, and matched by an engine’s KV events',
      labelNames: ['model_server', 'result'],
      registers: [this.registry],
      collect() {
        agreement.settle(Date.now());
        for (const [server, c] of agreement.counts()) {
          const before = exported.get(server) ?? { computed: 0, matched: 0 };
          this.inc({ model_server: server, result: 'computed' }, c.computed - before.computed);
          this.inc({ model_server: server, result: 'matched' }, c.matched - before.matched);
          exported.set(server, { computed: c.computed, matched: c.matched });
        }
      },
    });
  }

  kvIndexLag(ms: number): void {
    this.kvLag.observe(Math.max(0, ms) / 1000);
  }

  /** Records one decision's latency and outcome. */
  decided(mode: string, outcome: string, seconds: number): void {
    let child = this.#latencyByMode.get(mode);
    if (!child) {
      child = this.latency.child(mode);
      this.#latencyByMode.set(mode, child);
    }
    child.observe(seconds);
    let byOutcome = this.#decided.get(mode);
    if (!byOutcome) this.#decided.set(mode, (byOutcome = new Map()));
    const count = byOutcome.get(outcome);
    if (count) count.n++;
    else byOutcome.set(outcome, { n: 1 });
    if (outcome !== 'ok') this.errors.inc({ code: outcome });
  }

  readonly #latencyByMode = new Map<string, { observe(v: number): void }>();

  #flushDecisions(): void {
    this.decisions.reset();
    for (const [mode, byOutcome] of this.#decided) for (const [outcome, { n }] of byOutcome) this.decisions.inc({ mode, outcome }, n);
  }

  #flushPluginTimes(): void {
    for (const e of [...this.#pluginPending.values()].flatMap((byPlugin) => [...byPlugin.values()])) {
      if (e.calls === 0) continue;
      this.pluginSeconds.inc({ plugin: e.plugin, kind: e.kind }, e.seconds);
      this.pluginCalls.inc({ plugin: e.plugin, kind: e.kind }, e.calls);
      e.seconds = 0;
      e.calls = 0;
    }
  }
}
