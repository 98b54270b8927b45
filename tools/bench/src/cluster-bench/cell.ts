import { readFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { parsePrometheusText, type MetricFamily } from '@triad/prom-text';
import type { PoolKind } from '../cluster-sim/simulate';
import type { SimRequest, WorkloadSpec } from '../cluster-sim/workload';
import { runOpenLoop, type ClientResult } from './load';
import { applyPolicy, needsKvEvents, type ProcessPolicy } from './policies';
import { MODEL, startClusterStack, type ClusterStack, type ProcessName } from './stack';

export interface CellOptions {
  readonly pool: PoolKind;
  readonly workload: WorkloadSpec;
  readonly policy: ProcessPolicy;
  /** Offered load as a share of `capacity`. */
  readonly load: number;
  /** The pool's capacity for this workload, GPU-time requests/s. */
  readonly capacity: number;
  readonly engines: number;
  readonly timeScale: number;
  readonly requests: readonly SimRequest[];
  readonly warmup: number;
  readonly scrapeIntervalMs: number;
  readonly net: number;
  /** The engines publish KV events in every cell of the run (so precise and approximate cells run equal engines). */
  readonly kvEvents?: boolean;
}

/** What one cell measured. Latencies are GPU-equivalent ms (real ms / timeScale). */
export interface CellResult {
  readonly pool: PoolKind;
  readonly workload: string;
  readonly policy: ProcessPolicy;
  readonly load: number;
  readonly ratePerS: number;
  readonly measured: number;
  readonly failed: number;
  /** Failed requests by HTTP status (200 = the stream broke or carried an error event; 0 = no answer). */
  readonly failures: Readonly<Record<string, number>>;
  readonly ttftP50: number;
  readonly ttftP99: number;
  readonly e2eP50: number;
  readonly goodput: number;
  readonly prefixHit: number;
  readonly encoderHit: number;
  readonly imbalance: number;
  /** PD/EPD: requests the prefill pods served, and decodes that got their KV from one. */
  readonly prefillLegs: number;
  readonly kvPulls: number;
  /** CPU cores used on average during the measured window, per process. */
  readonly cores: Readonly<Record<ProcessName | 'bench', number>>;
  /** Gateway + scheduler CPU ms per measured request. */
  readonly routerCpuMsPerRequest: number;
  readonly engineHostLagP99Ms: number;
  readonly benchLagP99Ms: number;
  /** Share of the machine's cores all processes of the run used. */
  readonly machineBusy: number;
  /** Share of the machine's cores busy with anything (this run and every other process). */
  readonly hostBusy: number;
  /**
   * Precise prefix routing: of the block keys the gateway computed, the share an engine reported holding
   * (`triad_scheduler_kv_key_agreement_keys_total` matched / computed, whole run), keys computed, and the share of
   * the gateway's tokenizations that gave keys (`triad_gateway_kv_tokenize_total` ok / all). NaN otherwise.
   */
  readonly keyAgreement: number;
  readonly keysComputed: number;
  readonly keyedShare: number;
  /**
   * Why the scheduler picked what it did, whole run (its `/debug/pick-quality`): per profile, picks, which scorer
   * decided them and how often each affinity scorer was overruled by its load bound.
   */
  readonly pickQuality: PickQuality;
  /** Decisions the gateway made with its local fallback instead of the scheduler service, by reason (whole run). */
  readonly localDecisions: Readonly<Record<string, number>>;
}

export interface PickQuality {
  readonly profiles: Readonly<
    Record<string, { picks: number; decider: Readonly<Record<string, number>>; overruledByLoad: Readonly<Record<string, number>> }>
  >;
}

type Counters = Record<string, number>;

/** The host's CPU time so far (all processes, /proc/stat): busy and total jiffies. */
function hostCpu(): { busy: number; total: number } {
  const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  const total = fields.reduce((a, b) => a + b, 0);
  const idle = (fields[3] ?? 0) + (fields[4] ?? 0);
  return { busy: total - idle, total };
}

async function engineCounters(stack: ClusterStack): Promise<Counters[]> {
  return Promise.all(stack.engines.map(async (e) => (await (await fetch(`${e.url}/admin/counters`)).json()) as Counters));
}

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
}

type Families = Map<string, MetricFamily>;

const PROCESSES: readonly ProcessName[] = ['gateway', 'scheduler', 'pod-watcher', 'engines', 'nats', 'kv-indexer'];

async function scrape(url: string): Promise<Families> {
  return parsePrometheusText(await (await fetch(`${url}/metrics`)).text()).families;
}

/** Sum of a counter's samples whose labels match `labels`. */
function counter(families: Families, name: string, labels: Readonly<Record<string, string>>): number {
  const fam = families.get(name);
  if (!fam) return NaN;
  return fam.samples
    .filter((s) => (s.name === name || s.name === `${name}_total`) && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((n, s) => n + s.value, 0);
}

/** The scheduler's pick verdicts and the gateway's local decisions over the whole run. */
async function pickFigures(stack: ClusterStack): Promise<{ pickQuality: PickQuality; localDecisions: Record<string, number> }> {
  const pickQuality = (await (await fetch(`${stack.schedulerOpsUrl}/debug/pick-quality`)).json()) as PickQuality;
  const gateway = await scrape(stack.gatewayOpsUrl);
  const localDecisions: Record<string, number> = {};
  for (const s of gateway.get('triad_gateway_local_decisions_total')?.samples ?? []) {
    const reason = s.labels['reason'];
    if (reason !== undefined && s.value > 0) localDecisions[reason] = (localDecisions[reason] ?? 0) + s.value;
  }
  return { pickQuality, localDecisions };
}

/** KV keys the scheduler counts a request's keys as matched within (KeyAgreement's settleMs) plus a margin. */
const KEY_SETTLE_MS = 5_500;

async function keyFigures(stack: ClusterStack): Promise<{ keyAgreement: number; keysComputed: number; keyedShare: number }> {
  // Requests settle 5 s after their decision: wait until the last ones have, then read the whole run's counts.
  await sleep(KEY_SETTLE_MS);
  const scheduler = await scrape(stack.schedulerOpsUrl);
  const gateway = await scrape(stack.gatewayOpsUrl);
  const AGREEMENT = 'triad_scheduler_kv_key_agreement_keys_total';
  const computed = counter(scheduler, AGREEMENT, { result: 'computed' });
  const matched = counter(scheduler, AGREEMENT, { result: 'matched' });
  const TOKENIZE = 'triad_gateway_kv_tokenize_total';
  const ok = counter(gateway, TOKENIZE, { outcome: 'ok' }) + counter(gateway, TOKENIZE, { outcome: 'fallback' });
  const all = counter(gateway, TOKENIZE, {});
  return { keyAgreement: matched / computed, keysComputed: computed, keyedShare: ok / all };
}

/**
 * One cell of the benchmark on a fresh stack (cold caches, no affinity learned by an earlier policy): start the
 * services, apply the policy's scheduler config, send the open-loop load, and read the engines' counters and the
 * processes' CPU over the measured window.
 */
export async function runCell(o: CellOptions): Promise<CellResult> {
  const t0 = performance.now();
  const progress = (what: string) =>
    process.stderr.write(
      `cluster-bench: ${o.pool} · ${o.workload.name} · ${Math.round(o.load * 100)} % · ${o.policy}: ${what} at ${((performance.now() - t0) / 1000).toFixed(1)} s\n`,
    );
  const stack = await startClusterStack({
    pool: o.pool,
    engines: o.engines,
    timeScale: o.timeScale,
    scrapeIntervalMs: o.scrapeIntervalMs,
    net: o.net,
    kvEvents: (o.kvEvents ?? false) || needsKvEvents(o.policy),
    kvIndexer: needsKvEvents(o.policy),
  });
  try {
    progress('stack ready');
    await applyPolicy(stack.natsUrl, o.policy, stack.schedulerLog, { tokenizerDir: stack.tokenizerDir });
    progress('policy applied');
    let before: { counters: Counters[]; cpu: Record<string, number>; at: number } | undefined;
    let lagMax = 0;
    const lagTimer = setInterval(() => (lagMax = Math.max(lagMax, stack.engineHostLagMs() || 0)), 1000);
    const benchLag = monitorEventLoopDelay({ resolution: 10 });
    const cpu = () => {
      const host = hostCpu();
      return {
        ...Object.fromEntries(PROCESSES.map((p) => [p, stack.cpuSeconds(p)])),
        bench: process.cpuUsage().user / 1e6 + process.cpuUsage().system / 1e6,
        hostBusy: host.busy,
        hostTotal: host.total,
      };
    };
    let snapshot: Promise<void> | undefined;
    const results: ClientResult[] = await runOpenLoop(stack.gatewayUrl, MODEL, o.requests, o.timeScale, o.warmup, () => {
      lagMax = 0;
      benchLag.enable();
      snapshot = (async () => {
        const at = performance.now();
        before = { counters: await engineCounters(stack), cpu: cpu(), at };
      })();
    });
    await snapshot;
    progress('load done');
    const after = { counters: await engineCounters(stack), cpu: cpu(), at: performance.now() };
    clearInterval(lagTimer);
    benchLag.disable();
    if (!before) throw new Error('the run had no measured window');
    const picks = await pickFigures(stack);
    const keys = needsKvEvents(o.policy) ? await keyFigures(stack) : { keyAgreement: NaN, keysComputed: NaN, keyedShare: NaN };
    return { ...summarize(o, stack, results, before, after, lagMax, benchLag.percentile(99) / 1e6), ...keys, ...picks };
  } finally {
    await stack.close();
    progress('stack closed');
  }
}

function summarize(
  o: CellOptions,
  stack: ClusterStack,
  results: readonly ClientResult[],
  before: { counters: Counters[]; cpu: Record<string, number>; at: number },
  after: { counters: Counters[]; cpu: Record<string, number>; at: number },
  engineLag: number,
  benchLag: number,
): Omit<CellResult, 'keyAgreement' | 'keysComputed' | 'keyedShare' | 'pickQuality' | 'localDecisions'> {
  const measured = results.filter((r) => r.measured);
  const scale = (ms: number) => ms / o.timeScale;
  const ttft = measured.map((r) => scale(r.ttftMs)).sort((a, b) => a - b);
  const e2e = measured.map((r) => (r.ok ? scale(r.e2eMs) : Infinity)).sort((a, b) => a - b);
  const arrivals = measured.map((r) => r.request.arrival);
  const windowS = (Math.max(...arrivals) - Math.min(...arrivals)) / 1000;
  const good = measured.filter((r) => r.ok && scale(r.ttftMs) <= o.workload.ttftSloMs).length;
  const delta = (i: number, name: string) => (after.counters[i]?.[name] ?? 0) - (before.counters[i]?.[name] ?? 0);
  const sum = (name: string, keep: (role: string) => boolean) =>
    stack.engines.reduce((n, e, i) => (keep(e.role) ? n + delta(i, name) : n), 0);
  const computing = (role: string) => (o.pool === 'aggregated' ? role === 'both' : role === 'prefill');
  const prefixHit = sum('prefixHitTokens', computing) / sum('prefixQueryTokens', computing);
  const items = measured.reduce((n, r) => n + r.request.images.length, 0);
  const encoded = sum('encoderCacheMisses', () => true);
  const answering = stack.engines.map((e, i) => ({ e, i })).filter(({ e }) => e.role === 'both' || e.role === 'decode');
  const perEngine = answering.map(({ i }) => delta(i, 'requests'));
  const mean = perEngine.reduce((a, b) => a + b, 0) / Math.max(1, perEngine.length);
  const wallS = (after.at - before.at) / 1000;
  const cores = Object.fromEntries([...PROCESSES, 'bench'].map((p) => [p, (after.cpu[p] - before.cpu[p]) / wallS])) as CellResult['cores'];
  const hostBusy = (after.cpu['hostBusy'] - before.cpu['hostBusy']) / (after.cpu['hostTotal'] - before.cpu['hostTotal']);
  // The kv-indexer is part of the router when it runs (precise prefix routing).
  const routerCpuS = (cores.gateway + cores.scheduler + (Number.isFinite(cores['kv-indexer']) ? cores['kv-indexer'] : 0)) * wallS;
  const allCores = Object.values(cores).reduce((a, b) => a + (Number.isFinite(b) ? b : 0), 0);
  return {
    pool: o.pool,
    workload: o.workload.name,
    policy: o.policy,
    load: o.load,
    ratePerS: o.load * o.capacity,
    measured: measured.length,
    failed: measured.filter((r) => !r.ok).length,
    failures: measured.filter((r) => !r.ok).reduce<Record<string, number>>((m, r) => ({ ...m, [r.status]: (m[r.status] ?? 0) + 1 }), {}),
    ttftP50: percentile(ttft, 0.5),
    ttftP99: percentile(ttft, 0.99),
    e2eP50: percentile(e2e, 0.5),
    goodput: windowS > 0 ? good / windowS : NaN,
    prefixHit,
    encoderHit: items === 0 ? NaN : Math.max(0, 1 - encoded / items),
    imbalance: mean === 0 ? NaN : Math.max(...perEngine) / mean,
    prefillLegs: sum('requests', (r) => r === 'prefill'),
    kvPulls: sum('kvPullsReceived', (r) => r === 'decode'),
    cores,
    routerCpuMsPerRequest: (routerCpuS * 1000) / Math.max(1, measured.length),
    engineHostLagP99Ms: engineLag,
    benchLagP99Ms: benchLag,
    machineBusy: allCores / cpus().length,
    hostBusy,
  };
}
