import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { registerProcessMetrics } from '@triad/runtime';
import type { RegistryView } from '../registry/encoder-registry-sync';
import { SCRAPE_FAILURE_REASONS } from '../scrape/engine-http';

/** Publish latency (seconds, change seen → KV acknowledged): sub-millisecond on loopback, more under load. */
const PUBLISH_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5];
const SCRAPE_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];

/** Live counts read at scrape time (kept by the inventory, endpoint table and lease). */
export interface WatcherGaugeSources {
  objects(): Readonly<Record<string, number>>;
  invalidObjects(): Readonly<Record<string, number>>;
  endpoints(): Readonly<Record<string, number>>;
  scrapeTargets(): number;
  staleTargets(): number;
  isLeader(): boolean;
  /** Scrape shards: engines this replica scrapes, endpoint records it writes, live replicas sharing the work. */
  shard?(): { targets: number; endpoints: number; members: number };
  /** SGLang encoder registries as the registry sync sees them. */
  encoderRegistries?(): readonly RegistryView[];
  /** The confirmation time (ms since epoch) of this replica's last scrape freshness KV acknowledged; undefined before. */
  freshnessConfirmedAt?(): number | undefined;
}

/** The pod-watcher's own Prometheus metrics, in their own registry (served on the ops port). */
export class WatcherMetrics {
  readonly registry = new Registry();
  readonly sourceEvents = new Counter({
    name: 'triad_podwatcher_source_events_total',
    help: 'Object events received from the source, by kind and type (upsert, delete)',
    labelNames: ['kind', 'type'] as const,
    registers: [this.registry],
  });
  readonly rejections = new Counter({
    name: 'triad_podwatcher_invalid_object_events_total',
    help: 'Object versions rejected by validation, by kind',
    labelNames: ['kind'] as const,
    registers: [this.registry],
  });
  readonly fileReloads = new Counter({
    name: 'triad_podwatcher_file_reloads_total',
    help: 'File source versions by result (applied, refused)',
    labelNames: ['result'] as const,
    registers: [this.registry],
  });
  readonly statusPatches = new Counter({
    name: 'triad_podwatcher_status_patches_total',
    help: 'Accepted-condition writes to object status, by result',
    labelNames: ['result'] as const,
    registers: [this.registry],
  });
  readonly scrapes = new Counter({
    name: 'triad_podwatcher_scrapes_total',
    help: 'Scrapes by what (metrics, models) and result (ok, error)',
    labelNames: ['what', 'result'] as const,
    registers: [this.registry],
  });
  readonly scrapeErrors = new Counter({
    name: 'triad_podwatcher_scrape_errors_total',
    help: 'Failed scrapes by what (metrics, models, server_info) and reason (timeout, connect, http, unauthorized, body, parse)',
    labelNames: ['what', 'reason'] as const,
    registers: [this.registry],
  });
  readonly scrapeDuration = new Histogram({
    name: 'triad_podwatcher_scrape_duration_seconds',
    help: 'Duration of one /metrics scrape',
    buckets: SCRAPE_BUCKETS,
    registers: [this.registry],
  });
  readonly publishLatency = new Histogram({
    name: 'triad_podwatcher_publish_latency_seconds',
    help: 'From a state change to its KV write being acknowledged, by bucket',
    labelNames: ['bucket'] as const,
    buckets: PUBLISH_BUCKETS,
    registers: [this.registry],
  });
  readonly kvWrites = new Counter({
    name: 'triad_podwatcher_kv_writes_total',
    help: 'KV writes by bucket, op (put, delete) and result',
    labelNames: ['bucket', 'op', 'result'] as const,
    registers: [this.registry],
  });
  readonly shardChanges = new Counter({
    name: 'triad_podwatcher_shard_changes_total',
    help: 'Changes of the live replica set the scrape work is split over',
    registers: [this.registry],
  });
  readonly fullSyncs = new Counter({
    name: 'triad_podwatcher_full_syncs_total',
    help: 'Full republications of the state (start, reconnect, lease won, error recovery) by result',
    labelNames: ['result'] as const,
    registers: [this.registry],
  });
  readonly registryOps = new Counter({
    name: 'triad_podwatcher_encoder_registry_ops_total',
    help: 'SGLang encoder-registry calls by op (list, register, unregister) and result',
    labelNames: ['op', 'result'] as const,
    registers: [this.registry],
  });
  readonly registryEvents = new Counter({
    name: 'triad_podwatcher_encoder_registry_events_total',
    help:
      'SGLang encoder-registry events: session_started (first pass, server restarted or was unreachable), evicted and revived ' +
      "(by SGLang's health check), reregistered_after_ttl",
    labelNames: ['event'] as const,
    registers: [this.registry],
  });

  readonly mooncakeProbes = new Counter({
    name: 'triad_podwatcher_mooncake_probes_total',
    help:
      "vLLM Mooncake prefills' bootstrap probes (GET /query) by verdict: concurrent (upstream vLLM's connector answered) or " +
      "sequential (no bootstrap server: vllm-ascend's)",
    labelNames: ['flow'] as const,
    registers: [this.registry],
  });

  constructor(options: { defaultMetrics?: boolean } = {}) {
    if (options.defaultMetrics !== false) registerProcessMetrics(this.registry);
    // Closed label sets export 0 from the start, so failure ratios and rates read 0 rather than "no data".
    for (const what of ['metrics', 'models', 'server_info']) {
      for (const result of ['ok', 'error']) this.scrapes.inc({ what, result }, 0);
      for (const reason of SCRAPE_FAILURE_REASONS) this.scrapeErrors.inc({ what, reason }, 0);
    }
    for (const flow of ['concurrent', 'sequential']) this.mooncakeProbes.inc({ flow }, 0);
  }

  /** Gauges that read the live state when Prometheus scrapes. */
  watch(src: WatcherGaugeSources): void {
    const byKey = (name: string, help: string, label: string, read: () => Readonly<Record<string, number>>) =>
      new Gauge({
        name,
        help,
        labelNames: [label],
        registers: [this.registry],
        collect() {
          this.reset();
          for (const [k, n] of Object.entries(read())) this.set({ [label]: k }, n);
        },
      });
    byKey('triad_podwatcher_objects', 'Valid objects in force, by kind', 'kind', () => src.objects());
    byKey(
      'triad_podwatcher_invalid_objects',
      'Objects whose latest version is invalid (the last valid one stays in force), by kind',
      'kind',
      () => src.invalidObjects(),
    );
    byKey('triad_podwatcher_endpoints', 'Endpoints (pod × ModelServer) by role', 'role', () => src.endpoints());
    new Gauge({
      name: 'triad_podwatcher_scrape_targets',
      help: 'Engine addresses being scraped',
      registers: [this.registry],
      collect() {
        this.set(src.scrapeTargets());
      },
    });
    new Gauge({
      name: 'triad_podwatcher_stale_targets',
      help: 'Engine addresses whose last scrape failed',
      registers: [this.registry],
      collect() {
        this.set(src.staleTargets());
      },
    });
    new Gauge({
      name: 'triad_podwatcher_leader',
      help: '1 when this replica holds the writer lease',
      registers: [this.registry],
      collect() {
        this.set(src.isLeader() ? 1 : 0);
      },
    });
    const shard = () => src.shard?.() ?? { targets: src.scrapeTargets(), endpoints: 0, members: 1 };
    new Gauge({
      name: 'triad_podwatcher_shard_targets',
      help: 'Engine addresses this replica scrapes (its scrape shard)',
      registers: [this.registry],
      collect() {
        this.set(shard().targets);
      },
    });
    new Gauge({
      name: 'triad_podwatcher_shard_endpoints',
      help: 'Endpoint records this replica writes (its scrape shard)',
      registers: [this.registry],
      collect() {
        this.set(shard().endpoints);
      },
    });
    new Gauge({
      name: 'triad_podwatcher_shard_members',
      help: 'Live pod-watcher replicas sharing the scrape work (heartbeats)',
      registers: [this.registry],
      collect() {
        this.set(shard().members);
      },
    });
    new Gauge({
      name: 'triad_podwatcher_scrape_freshness_age_seconds',
      help: "Age of this replica's last published scrape freshness: how old readers take the numbers of its unchanged engines to be (NaN before the first)",
      registers: [this.registry],
      collect() {
        const at = src.freshnessConfirmedAt?.();
        this.set(at === undefined ? Number.NaN : Math.max(0, Date.now() - at) / 1000);
      },
    });
    const registries = () => src.encoderRegistries?.() ?? [];
    const registriesHelp = 'SGLang encoder registries by reachability of their listener (reachable, unreachable, unknown)';
    byKey('triad_podwatcher_encoder_registries', registriesHelp, 'state', () => {
      const out: Record<string, number> = { reachable: 0, unreachable: 0, unknown: 0 };
      for (const r of registries()) out[r.reachable === undefined ? 'unknown' : r.reachable ? 'reachable' : 'unreachable'] += 1;
      return out;
    });
    const entriesHelp = 'Encoders in SGLang registries by state (registered, pending, evicted, extra), over all registries';
    byKey('triad_podwatcher_encoder_registry_entries', entriesHelp, 'state', () => {
      const out: Record<string, number> = { registered: 0, pending: 0, evicted: 0, extra: 0 };
      for (const r of registries()) for (const e of r.encoders) out[e.state] = (out[e.state] ?? 0) + 1;
      return out;
    });
    const driftHelp = 'Registry drift over all registries: wanted encoders not listed (missing), listed encoders not wanted (extra)';
    byKey('triad_podwatcher_encoder_registry_drift', driftHelp, 'kind', () => {
      const out = { missing: 0, extra: 0 };
      for (const r of registries()) {
        out.missing += r.drift.missing.length;
        out.extra += r.drift.extra.length;
      }
      return out;
    });
  }
}
