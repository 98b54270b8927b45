import { decodeStepMs, type CostModel } from './cost-model';
import { SimEngine, type CacheListener, type Served } from './engine';
import { EventQueue } from './event-queue';
import { Rng } from './rng';
import type { RoutingPolicy } from './policies';
import { blockKeys, WorkloadGenerator, type SimRequest, type WorkloadSpec } from './workload';

export interface RunOptions {
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
}

/**
 * The pool's capacity for a workload: the completion rate the oracle sustains when the pool is saturated (arrivals
 * far above what it can serve), measured between the first and last quarter of the completions (at least 125
 * requests per engine, so a large pool reaches its steady state). It includes every
 * cache hit a fully informed router can get, so "95 % load" leaves a router little slack to waste.
 */
export function measureCapacity(
  workload: WorkloadSpec, engines: number, cost: CostModel, seed: number, oracle: (engines: readonly SimEngine[]) => RoutingPolicy,
): number {
  const rough = noCacheCapacity(workload, engines, cost, seed);
  const done: number[] = [];
  runSimulation(oracle, {
    workload, engines, load: 4, capacity: rough, requests: Math.max(2000, 125 * engines), seed: seed ^ 0xabc, cost, warmup: 0,
    onFinish: (s) => done.push(s.finishedAt),
  });
  done.sort((a, b) => a - b);
  const lo = Math.floor(done.length / 4), hi = Math.floor((3 * done.length) / 4);
  return (hi - lo) / (((done[hi] as number) - (done[lo] as number)) / 1000);
}

/**
 * The pool's capacity in requests/s for a workload when every request pays its full prefill (no cache hits): each
 * engine is bounded by its prefill queue (one prefill at a time) and by its running batch (maxRunning requests
 * decoding at the full-batch step time). Offered loads are shares of this number, the same for every policy.
 */
export function noCacheCapacity(workload: WorkloadSpec, engines: number, cost: CostModel, seed: number): number {
  const gen = new WorkloadGenerator(workload, seed ^ 0xcafe);
  let prefillMs = 0, decodeMs = 0;
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
  sorted.length === 0 ? NaN : (sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number);

/**
 * One run: open-loop Poisson arrivals at `load` × capacity, each request routed by `policy` and served by the
 * simulated engines, in simulated time (the machine's load changes nothing). Deterministic for a seed.
 */
export function runSimulation(policyFor: (engines: readonly SimEngine[]) => RoutingPolicy, opts: RunOptions): RunMetrics {
  const events = new EventQueue<() => void>();
  let now = 0;
  const schedule = (at: number, fn: () => void): void => events.push(at, fn);
  const engines = Array.from({ length: opts.engines }, (_, i) => new SimEngine(i, opts.cost, schedule, opts.cacheListener));
  const policy = policyFor(engines);
  const rate = opts.load * opts.capacity;
  const gen = new WorkloadGenerator(opts.workload, opts.seed);
  const warmup = Math.floor(opts.requests * (opts.warmup ?? 0.2));
  const served: Served[] = [];
  const scrapeMs = opts.scrapeIntervalMs ?? 1000;
  let issued = 0;
  let rejected = 0;
  let t = 0;
  // Inter-arrival gaps from their own stream, so the requests are the same whatever the load.
  const gapRng = new Rng(opts.seed ^ 0x9e3779b9);
  const gap = (): number => gapRng.exp(1000 / rate);
  const arrive = (request: SimRequest): void => {
    const keys = blockKeys(request.segments, opts.cost.blockTokens);
    const e = policy.route(request, now, keys);
    const index = issued;
    if (e < 0) {
      if (index >= warmup) rejected++;
      return;
    }
    policy.started?.(request, e, now);
    const engine = engines[e];
    if (!engine) throw new Error(`${policy.name} chose engine ${e} of ${engines.length}`);
    engine.submit(request, now, () => undefined, (s) => {
      policy.finished?.(request, e, s.finishedAt);
      opts.onFinish?.(s);
      if (index >= warmup) served.push(s);
    }, keys);
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
    policy.scrape?.(engines, now);
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
  return summarize(policy.name, opts, rate, served, rejected);
}

function summarize(policy: string, opts: RunOptions, rate: number, served: Served[], rejected: number): RunMetrics {
  const refused = new Array<number>(rejected).fill(Infinity);
  const ttft = [...served.map((s) => s.firstTokenAt - s.request.arrival), ...refused].sort((a, b) => a - b);
  const e2e = [...served.map((s) => s.finishedAt - s.request.arrival), ...refused].sort((a, b) => a - b);
  const first = Math.min(...served.map((s) => s.request.arrival));
  const last = Math.max(...served.map((s) => s.request.arrival));
  const spanS = Math.max(1e-9, (last - first) / 1000);
  let hit = 0, prompt = 0, encHit = 0, items = 0;
  const perEngine = new Array<number>(opts.engines).fill(0);
  for (const s of served) {
    hit += s.hitTokens;
    prompt += s.request.promptTokens;
    encHit += s.encoderHits;
    items += s.request.images.length;
    perEngine[s.engine]! += 1;
  }
  const mean = served.length / opts.engines;
  return {
    policy, workload: opts.workload.name, load: opts.load, ratePerS: rate, measured: served.length,
    ttftP50: pct(ttft, 50), ttftP99: pct(ttft, 99), e2eP50: pct(e2e, 50), e2eP99: pct(e2e, 99),
    goodput: ttft.filter((x) => x <= opts.workload.ttftSloMs).length / spanS,
    prefixHit: prompt === 0 ? NaN : hit / prompt,
    encoderHit: items === 0 ? NaN : encHit / items,
    rejected: rejected / (served.length + rejected),
    imbalance: mean === 0 ? NaN : Math.max(...perEngine) / mean,
  };
}
