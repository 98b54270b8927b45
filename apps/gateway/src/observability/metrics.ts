import { Counter, Gauge, Registry } from 'prom-client';
import type { Stage } from '@triad/bus';
import { registerProcessMetrics } from '@triad/runtime';
import type { EcHandoffFailureReason, KvStrandAction, KvStrandReason } from '@triad/request';
import { LOCAL_REASONS } from '../scheduling/scheduler-client';
import { FastCounter, FastGauge, FastHistogram, type CounterChild, type GaugeChild, type HistogramChild } from './fast-metrics';

const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
const STAGE_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
const TTFT_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80];
/** Round trip of one schedule message to the scheduler service (NATS both ways plus the batch's decisions). */
const BATCH_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25];
const TPOT_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5];

/**
 * Why an encoder-cache hand-off between an encode leg and its consumer failed (the label values of
 * `triad_gateway_ec_handoff_failures_total`). Every reason is exported from start at 0, so rules and dashboards
 * read 0 rather than nothing; a connector that detects a new kind of failure adds its reason here.
 */
export const EC_HANDOFF_FAILURE_REASONS = [
  'invalid_encoder_answer',
  'item_mismatch',
  'missing_consumer_address',
  'push_timeout',
  'output_lost',
] as const satisfies readonly EcHandoffFailureReason[];
export type { EcHandoffFailureReason };

/** The connectors whose sequential prefills must return `kv_transfer_params` (`triad_gateway_kv_params_missing_total`). */
export const KV_PARAMS_CONNECTORS = ['vllm-nixl', 'vllm-nixl-push', 'vllm-mooncake', 'vllm-epd'] as const;

/** What one finished request contributes to the metrics. */
export interface RequestSample {
  readonly model: string;
  readonly path: string;
  readonly route: string;
  readonly server: string;
  readonly upstreamModel: string;
  readonly mode: string;
  readonly status: number;
  readonly errorType: string;
  readonly durationS: number;
  readonly encodeS: number;
  readonly prefillS: number;
  readonly decodeS: number;
  readonly ttftS: number;
  readonly tpotS: number;
  readonly promptTokens: number;
  readonly completionTokens: number;
}

interface Children {
  /** By status, then error type. */
  readonly requests: Map<number, Map<string, CounterChild>>;
  readonly duration: Map<number, HistogramChild>;
  readonly prefill: HistogramChild;
  readonly decode: HistogramChild;
  readonly stage: Record<'encode' | 'prefill' | 'decode', HistogramChild>;
  readonly ttft: HistogramChild;
  readonly tpot: HistogramChild;
  readonly promptTokens: CounterChild;
  readonly completionTokens: CounterChild;
}

/**
 * The gateway's Prometheus metrics. Names follow Kthena's `kthena_router_*` where Kthena has the metric (so its
 * dashboards work); the router-side TTFT/TPOT and per-stage histograms Kthena lacks are `triad_gateway_*`.
 * Labelled children are cached per (model, path, route, server, mode), so a request costs map lookups, not
 * prom-client's label hashing; the per-request metrics are fast-metrics (plain numbers per label set, exported
 * through the same registry in prom-client's format), the rare ones prom-client's own.
 */
export class GatewayMetrics {
  readonly registry = new Registry();
  readonly #requests = new FastCounter({
    name: 'kthena_router_requests_total',
    help: 'Requests by outcome',
    labelNames: ['model', 'path', 'status_code', 'error_type', 'model_route', 'model_server', 'upstream_model'],
    registers: [this.registry],
  });
  readonly #duration = new FastHistogram({
    name: 'kthena_router_request_duration_seconds',
    help: 'Request duration',
    labelNames: ['model', 'path', 'status_code'],
    buckets: DURATION_BUCKETS,
    registers: [this.registry],
  });
  readonly #prefill = new FastHistogram({
    name: 'kthena_router_request_prefill_duration_seconds',
    help: 'Prefill phase duration',
    labelNames: ['model', 'path', 'status_code'],
    buckets: DURATION_BUCKETS,
    registers: [this.registry],
  });
  readonly #decode = new FastHistogram({
    name: 'kthena_router_request_decode_duration_seconds',
    help: 'Decode phase duration',
    labelNames: ['model', 'path', 'status_code'],
    buckets: DURATION_BUCKETS,
    registers: [this.registry],
  });
  readonly #tokens = new FastCounter({
    name: 'kthena_router_tokens_total',
    help: 'Tokens by type',
    labelNames: ['model', 'path', 'token_type', 'model_route', 'model_server'],
    registers: [this.registry],
  });
  readonly #rateLimited = new Counter({
    name: 'kthena_router_rate_limit_exceeded_total',
    help: 'Requests rejected by rate limits',
    labelNames: ['model', 'limit_type', 'path'],
    registers: [this.registry],
  });
  readonly #activeRequests = new FastGauge({
    name: 'kthena_router_active_requests',
    help: 'Requests being handled',
    registers: [this.registry],
  });
  /** Requests being handled (inc when one arrives, dec when it ends). */
  readonly activeRequests: GaugeChild = this.#activeRequests.labels();
  readonly #activeDownstream = new FastGauge({
    name: 'kthena_router_active_downstream_requests',
    help: 'Client requests in flight per model',
    labelNames: ['model'],
    registers: [this.registry],
  });
  readonly #activeUpstream = new FastGauge({
    name: 'kthena_router_active_upstream_requests',
    help: 'Engine legs in flight',
    labelNames: ['model_server', 'stage'],
    registers: [this.registry],
  });
  readonly #upstreamWaiting = new FastGauge({
    name: 'triad_gateway_upstream_waiting',
    labelNames: ['model_server', 'stage'],
    registers: [this.registry],
    help: 'Engine legs waiting for a free connection to their endpoint (its connection limit reached); in flight for scheduling',
  });
  readonly #activeStreams = new FastGauge({
    name: 'triad_gateway_active_streams',
    help: 'SSE streams being relayed',
    labelNames: ['model'],
    registers: [this.registry],
  });
  readonly #stage = new FastHistogram({
    name: 'triad_gateway_stage_duration_seconds',
    help: 'Per-stage duration (encode fan-out span, prefill, decode)',
    labelNames: ['model', 'mode', 'stage'],
    buckets: STAGE_BUCKETS,
    registers: [this.registry],
  });
  readonly #ttft = new FastHistogram({
    name: 'triad_gateway_time_to_first_token_seconds',
    help: 'Router-side time to first token (streams)',
    labelNames: ['model', 'mode'],
    buckets: TTFT_BUCKETS,
    registers: [this.registry],
  });
  readonly #tpot = new FastHistogram({
    name: 'triad_gateway_time_per_output_token_seconds',
    help: 'Router-side time per output token after the first (streams)',
    labelNames: ['model', 'mode'],
    buckets: TPOT_BUCKETS,
    registers: [this.registry],
  });
  readonly #schedule = new FastHistogram({
    name: 'triad_gateway_schedule_duration_seconds',
    help: 'Time to a scheduling decision',
    labelNames: ['source'],
    buckets: STAGE_BUCKETS,
    registers: [this.registry],
  });
  readonly #batch = new FastHistogram({
    name: 'triad_gateway_schedule_batch_size',
    help: 'Scheduling requests per NATS message',
    buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256],
    registers: [this.registry],
  });
  readonly #batchSizes: HistogramChild = this.#batch.labels();
  readonly #batchDuration = new FastHistogram({
    name: 'triad_gateway_schedule_batch_duration_seconds',
    help: 'Round trip of one schedule message to the scheduler service',
    buckets: BATCH_BUCKETS,
    registers: [this.registry],
  });
  readonly #batchDurations: HistogramChild = this.#batchDuration.labels();
  readonly #legs = new FastCounter({
    name: 'triad_gateway_upstream_legs_total',
    help: 'Engine legs by model server, stage and outcome (ok, error; retried legs count too)',
    labelNames: ['model_server', 'stage', 'outcome'],
    registers: [this.registry],
  });
  readonly #legChildren = new Map<string, Map<Stage, { ok: CounterChild; error: CounterChild }>>();
  readonly #ecHandoff = new Counter({
    name: 'triad_gateway_ec_handoff_failures_total',
    help: 'Encoder-cache hand-offs that failed, by reason',
    labelNames: ['reason'],
    registers: [this.registry],
  });
  readonly #kvStranded = new Counter({
    name: 'triad_gateway_kv_stranded_total',
    help: 'KV hand-offs a decode did not take (the prefill held KV for it), by engine, why, and what the gateway did',
    labelNames: ['engine', 'reason', 'action'],
    registers: [this.registry],
  });
  readonly #stageFallbacks = new Counter({
    name: 'triad_gateway_stage_fallback_total',
    help:
      "Requests that skipped a stage with no usable endpoint, served by the engine's shortcut (prefill on the decode, " +
      'encode on the EC consumer), by stage and why (none_ready, all_ejected, all_failed)',
    labelNames: ['stage', 'reason'],
    registers: [this.registry],
  });
  readonly #kvParamsMissing = new Counter({
    name: 'triad_gateway_kv_params_missing_total',
    help:
      'Prefills of a sequential vLLM KV connector (NIXL, vllm-ascend Mooncake) that answered without kv_transfer_params, so ' +
      'their decode prefilled the prompt again: the prefill runs another connector than its ModelServer names',
    labelNames: ['connector'],
    registers: [this.registry],
  });
  readonly #kvReleases = new Counter({
    name: 'triad_gateway_kv_releases_total',
    help: 'Release legs sent for stranded vLLM KV, by outcome (ok: a decode took the KV, so the prefill freed it)',
    labelNames: ['engine', 'outcome'],
    registers: [this.registry],
  });
  readonly #local = new Counter({
    name: 'triad_gateway_local_decisions_total',
    help: 'Decisions made by the local fallback',
    labelNames: ['reason'],
    registers: [this.registry],
  });
  readonly #ejections = new Counter({
    name: 'triad_gateway_outlier_ejections_total',
    help: 'Endpoints this gateway ejected (outlier detection), by model server, stage and what failed',
    labelNames: ['model_server', 'stage', 'reason'],
    registers: [this.registry],
  });
  readonly #restores = new Counter({
    name: 'triad_gateway_outlier_restores_total',
    help: 'Ejected endpoints a successful probe restored, by model server and stage',
    labelNames: ['model_server', 'stage'],
    registers: [this.registry],
  });
  readonly #streamResumes = new Counter({
    name: 'triad_gateway_stream_resumes_total',
    help:
      'Streams that broke after bytes reached the client on a ModelServer with trafficPolicy.streamResume, by outcome: resumed ' +
      '(continued on another pod and completed), completed (broke after the final chunk; the gateway ended it), failed ' +
      '(resumed, then failed), refused (not resumable: limits, n > 1, logprobs, tool calls, no other pod)',
    labelNames: ['model', 'outcome'],
    registers: [this.registry],
  });
  readonly #retries = new Counter({
    name: 'triad_gateway_retries_total',
    help: 'Attempts retried on an alternate before the first byte',
    labelNames: ['model', 'stage'],
    registers: [this.registry],
  });
  readonly #connectionsRefused = new Counter({
    name: 'triad_gateway_connections_refused_total',
    help:
      'Client connections answered 429 and closed when they opened, by reason (per_client_cap: their address held ' +
      'max-connections-per-client open connections already)',
    labelNames: ['reason'],
    registers: [this.registry],
  });
  readonly #children = new Map<string, Children>();
  #lastChildren: (Pick<RequestSample, 'model' | 'path' | 'route' | 'server' | 'mode'> & { readonly children: Children }) | undefined;
  readonly #downstreamByModel = new Map<string, GaugeChild>();
  readonly #streamsByModel = new Map<string, GaugeChild>();
  readonly #upstreamByServer = new Map<string, Map<Stage, GaugeChild>>();
  readonly #waitingByServer = new Map<string, Map<Stage, GaugeChild>>();
  readonly #scheduledBySource: Record<'scheduler' | 'local', HistogramChild>;

  constructor(options: { defaultMetrics?: boolean } = {}) {
    if (options.defaultMetrics !== false) registerProcessMetrics(this.registry);
    this.#scheduledBySource = { scheduler: this.#schedule.labels('scheduler'), local: this.#schedule.labels('local') };
    // Closed label sets export 0 from the start: a ratio or rate over them reads 0, not "no data".
    for (const reason of LOCAL_REASONS) this.#local.inc({ reason }, 0);
    for (const reason of EC_HANDOFF_FAILURE_REASONS) this.#ecHandoff.inc({ reason }, 0);
    for (const connector of KV_PARAMS_CONNECTORS) this.#kvParamsMissing.inc({ connector }, 0);
    for (const outcome of ['ok', 'failed']) this.#kvReleases.inc({ engine: 'vLLM', outcome }, 0);
    this.#connectionsRefused.inc({ reason: 'per_client_cap' }, 0);
  }

  /** The model's child of a one-label gauge, cached by the model name itself (no key string built per call). */
  #byModel(gauge: FastGauge, cache: Map<string, GaugeChild>, model: string): GaugeChild {
    let child = cache.get(model);
    if (child === undefined) {
      child = gauge.labels(model);
      cache.set(model, child);
    }
    return child;
  }

  /**
   * The (server, stage) child of a gauge, cached per server name and stage (the gauges move twice per leg): two
   * lookups on strings the caller holds, instead of a key concatenated, flattened and hashed on every call.
   */
  #byServerStage(gauge: FastGauge, cache: Map<string, Map<Stage, GaugeChild>>, server: string, stage: Stage): GaugeChild {
    let stages = cache.get(server);
    if (stages === undefined) {
      stages = new Map();
      cache.set(server, stages);
    }
    let child = stages.get(stage);
    if (child === undefined) {
      child = gauge.labels(server, stage);
      stages.set(stage, child);
    }
    return child;
  }

  request(s: RequestSample): void {
    const c = this.#childrenFor(s);
    let byError = c.requests.get(s.status);
    if (byError === undefined) {
      byError = new Map();
      c.requests.set(s.status, byError);
    }
    let counter = byError.get(s.errorType);
    if (counter === undefined) {
      counter = this.#requests.labels(s.model, s.path, String(s.status), s.errorType, s.route, s.server, s.upstreamModel);
      byError.set(s.errorType, counter);
    }
    counter.inc();
    let duration = c.duration.get(s.status);
    if (duration === undefined) {
      duration = this.#duration.labels(s.model, s.path, String(s.status));
      c.duration.set(s.status, duration);
    }
    duration.observe(s.durationS);
    if (s.encodeS > 0) c.stage.encode.observe(s.encodeS);
    if (s.prefillS > 0) {
      c.stage.prefill.observe(s.prefillS);
      if (s.status < 400) c.prefill.observe(s.prefillS);
    }
    if (s.decodeS > 0) {
      c.stage.decode.observe(s.decodeS);
      if (s.status < 400) c.decode.observe(s.decodeS);
    }
    if (s.ttftS > 0) c.ttft.observe(s.ttftS);
    if (s.tpotS > 0) c.tpot.observe(s.tpotS);
    if (s.promptTokens > 0) c.promptTokens.inc(s.promptTokens);
    if (s.completionTokens > 0) c.completionTokens.inc(s.completionTokens);
  }

  #childrenFor(s: RequestSample): Children {
    // Consecutive requests mostly share their labels: the last label set is compared before a key is built.
    const last = this.#lastChildren;
    if (
      last !== undefined &&
      last.model === s.model &&
      last.path === s.path &&
      last.route === s.route &&
      last.server === s.server &&
      last.mode === s.mode
    )
      return last.children;
    const key = `${s.model}\u0000${s.path}\u0000${s.route}\u0000${s.server}\u0000${s.mode}`;
    let c = this.#children.get(key);
    if (c === undefined) {
      c = {
        requests: new Map(),
        duration: new Map(),
        prefill: this.#prefill.labels(s.model, s.path, '200'),
        decode: this.#decode.labels(s.model, s.path, '200'),
        stage: {
          encode: this.#stage.labels(s.model, s.mode, 'encode'),
          prefill: this.#stage.labels(s.model, s.mode, 'prefill'),
          decode: this.#stage.labels(s.model, s.mode, 'decode'),
        },
        ttft: this.#ttft.labels(s.model, s.mode),
        tpot: this.#tpot.labels(s.model, s.mode),
        promptTokens: this.#tokens.labels(s.model, s.path, 'input', s.route, s.server),
        completionTokens: this.#tokens.labels(s.model, s.path, 'output', s.route, s.server),
      };
      this.#children.set(key, c);
    }
    this.#lastChildren = { model: s.model, path: s.path, route: s.route, server: s.server, mode: s.mode, children: c };
    return c;
  }

  downstream(model: string, delta: number): void {
    this.#byModel(this.#activeDownstream, this.#downstreamByModel, model).inc(delta);
  }

  upstream(server: string, stage: Stage, delta: number): void {
    this.#byServerStage(this.#activeUpstream, this.#upstreamByServer, server, stage).inc(delta);
  }

  /** Legs waiting for a free connection (+1 when one starts waiting, -1 when it got one or gave up). */
  upstreamWaiting(server: string, stage: Stage, delta: number): void {
    this.#byServerStage(this.#upstreamWaiting, this.#waitingByServer, server, stage).inc(delta);
  }

  streams(model: string, delta: number): void {
    this.#byModel(this.#activeStreams, this.#streamsByModel, model).inc(delta);
  }

  /** A client connection refused when it opened (its address over the per-client connection cap). */
  connectionRefused(reason: 'per_client_cap'): void {
    this.#connectionsRefused.inc({ reason });
  }

  rateLimited(model: string, limitType: string, path: string): void {
    this.#rateLimited.inc({ model, limit_type: limitType, path });
  }

  scheduled(source: 'scheduler' | 'local', seconds: number): void {
    this.#scheduledBySource[source].observe(seconds);
  }

  /** One schedule message answered by the scheduler service: its request count and round trip. */
  batch(size: number, seconds: number): void {
    this.#batchSizes.observe(size);
    this.#batchDurations.observe(seconds);
  }

  /** One engine leg ended. Both outcomes of a (server, stage) export once either happened, the other at 0. */
  leg(server: string, stage: Stage, ok: boolean): void {
    let stages = this.#legChildren.get(server);
    if (stages === undefined) {
      stages = new Map();
      this.#legChildren.set(server, stages);
    }
    let c = stages.get(stage);
    if (c === undefined) {
      c = { ok: this.#legs.labels(server, stage, 'ok'), error: this.#legs.labels(server, stage, 'error') };
      c.ok.inc(0);
      c.error.inc(0);
      stages.set(stage, c);
    }
    (ok ? c.ok : c.error).inc();
  }

  outlierEjected(server: string, stage: Stage, reason: string): void {
    this.#ejections.inc({ model_server: server, stage, reason });
  }

  outlierRestored(server: string, stage: Stage): void {
    this.#restores.inc({ model_server: server, stage });
  }

  /** `triad_gateway_outliers_ejected{stage}`: endpoints ejected right now in the shared state, read at scrape time. */
  watchOutliers(count: () => Record<string, number>): void {
    new Gauge({
      name: 'triad_gateway_outliers_ejected',
      help: 'Endpoints ejected right now (shared outlier state), by stage',
      labelNames: ['stage'],
      registers: [this.registry],
      collect() {
        this.reset();
        for (const [stage, n] of Object.entries(count())) this.set({ stage }, n);
      },
    });
  }

  kvStranded(engine: string, reason: KvStrandReason, action: KvStrandAction): void {
    this.#kvStranded.inc({ engine, reason, action });
  }

  stageFallback(stage: string, reason: string): void {
    this.#stageFallbacks.inc({ stage, reason });
  }

  streamResumed(model: string, outcome: string): void {
    this.#streamResumes.inc({ model, outcome });
  }

  kvParamsMissing(connector: string): void {
    this.#kvParamsMissing.inc({ connector });
  }

  kvReleased(engine: string, ok: boolean): void {
    this.#kvReleases.inc({ engine, outcome: ok ? 'ok' : 'failed' });
  }

  ecHandoffFailure(reason: EcHandoffFailureReason): void {
    this.#ecHandoff.inc({ reason });
  }

  local(reason: string, count: number): void {
    this.#local.inc({ reason }, count);
  }

  retry(model: string, stage: string): void {
    this.#retries.inc({ model, stage });
  }
}
