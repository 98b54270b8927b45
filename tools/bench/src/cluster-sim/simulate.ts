import { decodeStepMs, type CostModel } from './cost-model';
import { SimEncoder } from './encoder';
import { SimEngine, type CacheListener, type EngineRole, type Served } from './engine';
import { EventQueue } from './event-queue';
import { Rng } from './rng';
import type { Route, RoutingPolicy } from './policies';
import { blockKeys, WorkloadGenerator, type SimRequest, type WorkloadSpec } from './workload';

/** How the pool's GPUs are split: whole engines, prefill + decode pods, or encoders + prefill + decode pods. */
export type PoolKind = 'aggregated' | 'pd' | 'epd';
export const POOL_KINDS: readonly PoolKind[] = ['aggregated', 'pd', 'epd'];

/** The simulated pool a policy routes over: language engines (by role) and encoder pods. */
export interface SimPool {
  readonly kind: PoolKind;
  readonly engines: readonly SimEngine[];
  readonly encoders: readonly SimEncoder[];
}

/**
 * The pool's split of `n` GPUs: aggregated, all `both`; PD, half prefill and half decode; EPD, a quarter encoders
 * and the rest half prefill, half decode (the ratios of vLLM's and SGLang's 1E/1P/1D-style examples, scaled).
 */
export function poolLayout(kind: PoolKind, n: number): { roles: EngineRole[]; encoders: number } {
  if (kind === 'aggregated') return { roles: new Array<EngineRole>(n).fill('both'), encoders: 0 };
  const encoders = kind === 'epd' ? Math.max(1, Math.round(n / 4)) : 0;
  const language = n - encoders;
  const prefills = Math.max(1, Math.floor(language / 2));
  return {
    roles: [...new Array<EngineRole>(prefills).fill('prefill'), ...new Array<EngineRole>(language - prefills).fill('decode')],
    encoders,
  };
}

export interface RunOptions {
  /** Pool kind (default aggregated). */
  readonly pool?: PoolKind;
  readonly workload: WorkloadSpec;
  /** Pool capacity in requests/s that `load` is a share of (see `measureCapacity`). */
  readonly capacity: number;
  readonly engines: number;
  /** Offered load as a share of the pool's capacity (0.5, 0.8, 0.95). */
  readonly load: number;
  readonly requests: number;
  readonly seed: number;
  readonly cost: CostModel;
  /** Share of the first requests left out of the metrics (caches start cold). */
  readonly warmup?: number;
  readonly scrapeIntervalMs?: number;
  /** Receives the engines' block stored/removed events (a precise-prefix index can follow them). */
  readonly cacheListener?: CacheListener;
  /** Sees every finished request (warm-up included). */
  readonly onFinish?: (s: Served) => void;
}

/** The policy factory a run calls once with its pool. */
export type PolicyFactory = (pool: SimPool) => RoutingPolicy;

export interface RunMetrics {
  readonly policy: string;
  readonly workload: string;
  readonly load: number;
  readonly ratePerS: number;
  readonly measured: number;
  readonly ttftP50: number;
  readonly ttftP99: number;
  readonly e2eP50: number;
  readonly e2eP99: number;
  /** Requests per second whose TTFT met the workload's SLO. */
  readonly goodput: number;
  /** Prompt tokens served from prefix caches / prompt tokens. */
  readonly prefixHit: number;
  /** Media items not encoded / media items (NaN without media). */
  readonly encoderHit: number;
  /** Share of the measured requests the router refused (their TTFT counts as infinite in the percentiles). */
  readonly rejected: number;
  /** Requests on the busiest engine / mean requests per engine. */
  readonly imbalance: number;
  /** Pool kind the run used. */
  readonly pool: PoolKind;
  /** Share of the measured requests that skipped their prefill leg / their encoders (per-request disaggregation). */
  readonly skippedPrefill: number;
  readonly localEncode: number;
}

/**
 * The pool's capacity for a workload: the completion rate the oracle sustains when the pool is saturated (arrivals
 * far above what it can serve), measured between the first and last quarter of the completions (at least 125
 * requests per engine, so a large pool reaches its steady state). It includes every
 * cache hit a fully informed router can get, so "95 % load" leaves a router little slack to waste.
 */
export function measureCapacity(
  workload: WorkloadSpec,
  engines: number,
  cost: CostModel,
  seed: number,
  oracle: PolicyFactory,
  pool: PoolKind = 'aggregated',
): number {
  const rough = noCacheCapacity(workload, engines, cost, seed);
  const done: number[] = [];
  runSimulation(oracle, {
    pool,
    workload,
    engines,
    load: 4,
    capacity: rough,
    requests: Math.max(2000, 125 * engines),
    seed: seed ^ 0xabc,
    cost,
    warmup: 0,
    onFinish: (s) => done.push(s.finishedAt),
  });
  done.sort((a, b) => a - b);
  const lo = Math.floor(done.length / 4),
    hi = Math.floor((3 * done.length) / 4);
  return (hi - lo) / ((done[hi] - done[lo]) / 1000);
}

/**
 * The pool's capacity in requests/s for a workload when every request pays its full prefill (no cache hits): each
 * engine is bounded by its prefill queue (one prefill at a time) and by its running batch (maxRunning requests
 * decoding at the full-batch step time). Offered loads are shares of this number, the same for every policy.
 */
export function noCacheCapacity(workload: WorkloadSpec, engines: number, cost: CostModel, seed: number): number {
  const gen = new WorkloadGenerator(workload, seed ^ 0xcafe);
  let prefillMs = 0,
    decodeMs = 0;
  const n = 4000;
  for (let i = 0; i < n; i++) {
    const r = gen.next(0);
    prefillMs += cost.prefillOverheadMs + r.images.length * cost.encodeMsPerItem + (r.promptTokens / 1000) * cost.prefillMsPer1kTokens;
    decodeMs += decodeStepMs(cost, cost.maxRunning) * r.outputTokens;
  }
  const perEngine = Math.min(1000 / (prefillMs / n), cost.maxRunning * (1000 / ((prefillMs + decodeMs) / n)));
  return perEngine * engines;
}

const pct = (sorted: readonly number[], p: number): number =>
  sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];

/**
 * One run: open-loop Poisson arrivals at `load` × capacity, each request routed by `policy` and served by the
 * simulated engines, in simulated time (the machine's load changes nothing). Deterministic for a seed.
 */
export function runSimulation(policyFor: PolicyFactory, opts: RunOptions): RunMetrics {
  const events = new EventQueue<() => void>();
  let now = 0;
  const schedule = (at: number, fn: () => void): void => events.push(at, fn);
  const kind = opts.pool ?? 'aggregated';
  const layout = poolLayout(kind, opts.engines);
  const engines = layout.roles.map((role, i) => new SimEngine(i, opts.cost, schedule, opts.cacheListener, role));
  const encoders = Array.from({ length: layout.encoders }, (_, i) => new SimEncoder(i, opts.cost));
  const pool: SimPool = { kind, engines, encoders };
  const policy = policyFor(pool);
  const rate = opts.load * opts.capacity;
  const gen = new WorkloadGenerator(opts.workload, opts.seed);
  const warmup = Math.floor(opts.requests * (opts.warmup ?? 0.2));
  const served: Outcome[] = [];
  const scrapeMs = opts.scrapeIntervalMs ?? 1000;
  let issued = 0;
  let rejected = 0;
  let t = 0;
  // Inter-arrival gaps from their own stream, so the requests are the same whatever the load.
  const gapRng = new Rng(opts.seed ^ 0x9e3779b9);
  const gap = (): number => gapRng.exp(1000 / rate);
  const arrive = (request: SimRequest): void => {
    const keys = blockKeys(request.segments, opts.cost.blockTokens);
    const route = policy.route(request, now, keys);
    const index = issued;
    if (route === null) {
      if (index >= warmup) rejected++;
      return;
    }
    execute(
      pool,
      policy,
      schedule,
      () => now,
      request,
      route,
      keys,
      (o) => {
        opts.onFinish?.(o.served);
        if (index >= warmup) served.push(o);
      },
    );
  };
  const nextArrival = (): void => {
    if (issued >= opts.requests) return;
    t += gap();
    const request = gen.next(t);
    schedule(t, () => {
      arrive(request);
      issued++;
      nextArrival();
    });
  };
  const scrape = (): void => {
    policy.scrape?.(pool, now);
    if (issued < opts.requests || served.length + rejected + warmup < opts.requests) schedule(now + scrapeMs, scrape);
  };
  nextArrival();
  schedule(0, scrape);
  for (let ev = events.pop(); ev; ev = events.pop()) {
    now = ev.time;
    ev.item();
    // Only the scrape timer left: every request has finished.
    if (issued >= opts.requests && events.size <= 1 && served.length + rejected + warmup >= opts.requests) break;
  }
  return summarize(policy.name, kind, opts, rate, served, rejected);
}

/** One finished request: the answering engine's record, with the prefix and encoder hits of the whole pipeline. */
interface Outcome {
  readonly served: Served;
  readonly hitTokens: number;
  readonly encoderHits: number;
  readonly skippedPrefill: boolean;
  readonly localEncode: boolean;
}

/** TTFT (from the leg's start) and TPOT of an answering leg, as the gateway measures a streamed answer. */
function answerLatency(s: Served, legStart: number): { ttftMs: number; tpotMs?: number } {
  const out = s.request.outputTokens;
  return { ttftMs: s.firstTokenAt - legStart, ...(out > 1 ? { tpotMs: (s.finishedAt - s.firstTokenAt) / (out - 1) } : {}) };
}

/**
 * Runs a routed request through the pool, as a gateway would execute the decision: encoder legs (items on their
 * encoders, the outputs handed to the consumer), then the prefill leg and the decode from the transferred KV, or
 * the whole request on one engine. Each extra leg costs `legOverheadMs`. The engines never see the router.
 */
function execute(
  pool: SimPool,
  policy: RoutingPolicy,
  schedule: (at: number, fn: () => void) => void,
  clock: () => number,
  request: SimRequest,
  route: Route,
  keys: number[],
  done: (o: Outcome) => void,
): void {
  const cost = pool.engines[0].cost;
  const final = pool.engines[route.engine];
  if (!final) throw new Error(`${policy.name} chose engine ${route.engine} of ${pool.engines.length}`);
  const start = clock();
  let encoderMisses = 0;
  const handed = new Set<number>();
  const remoteEncode = route.encoders !== undefined && route.encoders.length > 0;
  const language = (at: number): void => {
    if (route.prefill === undefined) {
      policy.started?.(request, 'final', route.engine, at);
      final.submit(
        request,
        at,
        () => undefined,
        (s) => {
          policy.finished?.(request, 'final', route.engine, s.finishedAt, answerLatency(s, at));
          done({
            served: s,
            hitTokens: s.hitTokens,
            encoderHits: s.encoderHits - handed.size + (handed.size - encoderMisses),
            skippedPrefill: pool.kind !== 'aggregated',
            localEncode: pool.kind === 'epd' && !remoteEncode && request.images.length > 0,
          });
        },
        keys,
        { kind: 'full', handed },
      );
      return;
    }
    const prefill = pool.engines[route.prefill];
    if (!prefill) throw new Error(`${policy.name} chose prefill ${route.prefill} of ${pool.engines.length}`);
    policy.started?.(request, 'prefill', route.prefill, at);
    prefill.submit(
      request,
      at,
      (p) => {
        policy.finished?.(request, 'prefill', route.prefill as number, p.firstTokenAt, { ttftMs: p.firstTokenAt - at });
        const toDecode = p.firstTokenAt + cost.legOverheadMs;
        schedule(toDecode, () => {
          policy.started?.(request, 'final', route.engine, toDecode);
          final.submit(
            request,
            toDecode,
            () => undefined,
            (s) => {
              policy.finished?.(request, 'final', route.engine, s.finishedAt, answerLatency(s, toDecode));
              done({
                served: s,
                hitTokens: p.hitTokens,
                encoderHits: p.encoderHits - handed.size + (handed.size - encoderMisses),
                skippedPrefill: false,
                localEncode: pool.kind === 'epd' && !remoteEncode && request.images.length > 0,
              });
            },
            keys,
            { kind: 'kv' },
          );
        });
      },
      () => undefined,
      keys,
      { kind: 'prefill', handed },
    );
  };
  if (!remoteEncode) {
    language(start);
    return;
  }
  // Encoder legs: each encoder gets its items; the consumer starts once every output has arrived.
  const byEncoder = new Map<number, number[]>();
  route.encoders.forEach((e, item) => {
    const list = byEncoder.get(e);
    if (list) list.push(item);
    else byEncoder.set(e, [item]);
  });
  let ready = start;
  for (const [e, items] of byEncoder) {
    const encoder = pool.encoders[e];
    if (!encoder) throw new Error(`${policy.name} chose encoder ${e} of ${pool.encoders.length}`);
    policy.started?.(request, 'encode', e, start);
    let last = start;
    for (const item of items) {
      const image = request.images[item];
      const r = encoder.encode(image, start);
      if (!r.hit) encoderMisses++;
      handed.add(image);
      last = Math.max(last, r.doneAt);
    }
    const arrived = last + cost.legOverheadMs + items.length * cost.ecTransferMsPerItem;
    schedule(arrived, () => policy.finished?.(request, 'encode', e, arrived));
    ready = Math.max(ready, arrived);
  }
  schedule(ready, () => language(ready));
}

function summarize(policy: string, pool: PoolKind, opts: RunOptions, rate: number, outcomes: Outcome[], rejected: number): RunMetrics {
  const refused = new Array<number>(rejected).fill(Infinity);
  const ttft = [...outcomes.map((o) => o.served.firstTokenAt - o.served.request.arrival), ...refused].sort((a, b) => a - b);
  const e2e = [...outcomes.map((o) => o.served.finishedAt - o.served.request.arrival), ...refused].sort((a, b) => a - b);
  let first = Infinity,
    last = -Infinity;
  for (const o of outcomes) {
    first = Math.min(first, o.served.request.arrival);
    last = Math.max(last, o.served.request.arrival);
  }
  const spanS = Math.max(1e-9, (last - first) / 1000);
  let hit = 0,
    prompt = 0,
    encHit = 0,
    items = 0,
    skipped = 0,
    local = 0;
  const perEngine = new Map<number, number>();
  for (const o of outcomes) {
    hit += o.hitTokens;
    prompt += o.served.request.promptTokens;
    encHit += o.encoderHits;
    items += o.served.request.images.length;
    if (o.skippedPrefill) skipped++;
    if (o.localEncode) local++;
    perEngine.set(o.served.engine, (perEngine.get(o.served.engine) ?? 0) + 1);
  }
  // Imbalance over the engines that answer requests (all of them, or the decode pods).
  const answering = poolLayout(pool, opts.engines).roles.filter((r) => r !== 'prefill').length;
  const mean = outcomes.length / answering;
  const n = outcomes.length;
  return {
    policy,
    workload: opts.workload.name,
    load: opts.load,
    ratePerS: rate,
    measured: n,
    ttftP50: pct(ttft, 50),
    ttftP99: pct(ttft, 99),
    e2eP50: pct(e2e, 50),
    e2eP99: pct(e2e, 99),
    goodput: ttft.filter((x) => x <= opts.workload.ttftSloMs).length / spanS,
    prefixHit: prompt === 0 ? NaN : hit / prompt,
    encoderHit: items === 0 ? NaN : encHit / items,
    rejected: rejected / (n + rejected),
    imbalance: mean === 0 ? NaN : Math.max(...perEngine.values()) / mean,
    pool,
    skippedPrefill: n === 0 ? 0 : pool === 'aggregated' ? 0 : skipped / n,
    localEncode: n === 0 ? 0 : local / n,
  };
}
