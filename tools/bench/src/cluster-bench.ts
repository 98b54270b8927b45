// The cluster benchmark (issue 30): Triad itself — nats-server, `triad pod-watcher` reading a manifests file,
// `triad scheduler`, `triad gateway` — in front of N engine-sims that run the vLLM V1 engine-core model
// (continuous batching with a token budget, KV block pool with prefix caching, encoder cache; libs/engine-sim,
// docs/engine-sim.md), under open-loop Poisson load at shares of the pool's measured capacity. Each policy is a
// scheduler config pushed to NATS KV as an operator would. Prints one Markdown table per pool and workload, the
// machine check (CPU per process, event-loop lag) and, with --calibrate, the discrete-event simulator's figures
// for the same cells (docs/routing-benchmark.md). Policy `triad-precise` (named explicitly) routes on the engines' KV
// events: every engine of that run publishes them, a kv-indexer follows them in its cells, and the tables add key
// agreement (docs/kv-events.md).
// Run: flock /tmp/triad-bench.lock npx tsx tools/bench/src/cluster-bench.ts [--quick] [--pools aggregated,pd,epd]
//        [--workloads shared-chat,image-qa,mixed-qa,rag] [--loads 0.5,0.7,0.9]
//        [--policies triad,random,least-request,kthena[,triad-precise]]
//        [--engines 8] [--requests 600] [--time-scale 8] [--capacity R] [--capacity-seconds 30] [--scrape-interval 1000]
//        [--seed 1] [--calibrate] [--json FILE]
import { writeFileSync } from 'node:fs';
import { POOL_KINDS, poolLayout, type PoolKind } from './cluster-sim/simulate';
import { WORKLOADS, type WorkloadName } from './cluster-sim/workload';
import { runCell, type CellResult } from './cluster-bench/cell';
import { CALIBRATION_HEADERS, calibrationRows, simulateCell, type CalibrationRow } from './cluster-bench/calibration';
import { ENGINE } from './cluster-bench/engine-profile';
import { measureSaturation, repeatCeiling, workloadRequests } from './cluster-bench/load';
import { applyPolicy, DEFAULT_PROCESS_POLICIES, needsKvEvents, PROCESS_POLICIES, type ProcessPolicy } from './cluster-bench/policies';
import { MODEL, startClusterStack } from './cluster-bench/stack';
import { markdownTable } from './lib/table';
import { parseToolArgs } from '@triad/testing';

const { values: args } = parseToolArgs({
  options: {
    quick: { type: 'boolean', default: false },
    pools: { type: 'string' },
    workloads: { type: 'string' },
    loads: { type: 'string' },
    policies: { type: 'string' },
    engines: { type: 'string' },
    requests: { type: 'string' },
    'time-scale': { type: 'string', default: '8' },
    capacity: { type: 'string' },
    'capacity-seconds': { type: 'string' },
    'scrape-interval': { type: 'string', default: '1000' },
    seed: { type: 'string', default: '1' },
    warmup: { type: 'string', default: '0.2' },
    calibrate: { type: 'boolean', default: false },
    json: { type: 'string' },
  },
});

const quick = args.quick;
const list = (v: string | undefined, full: string, smoke: string) => (v ?? (quick ? smoke : full)).split(',').filter(Boolean);
const pools = list(args.pools, 'aggregated,pd,epd', 'aggregated') as PoolKind[];
const workloads = list(args.workloads, 'shared-chat,image-qa,mixed-qa,rag', 'shared-chat,image-qa') as WorkloadName[];
const loads = list(args.loads, '0.5,0.7,0.9', '0.7').map(Number);
const policies = list(args.policies, DEFAULT_PROCESS_POLICIES.join(','), 'triad,random') as ProcessPolicy[];
const engines = Number(args.engines ?? (quick ? 4 : 8));
const requestCount = Number(args.requests ?? (quick ? 150 : 600));
const timeScale = Number(args['time-scale']);
const capacitySeconds = Number(args['capacity-seconds'] ?? (quick ? 10 : 30));
const scrapeIntervalMs = Number(args['scrape-interval']);
const seed = Number(args.seed);
const warmup = Number(args.warmup);
// A share of the requests, e.g. 0.67 for a steady-state run: a count here (`--warmup 4000`) would leave no measured window.
if (!(warmup >= 0 && warmup < 1)) throw new Error(`--warmup is a share of the requests in [0, 1): ${args.warmup}`);
for (const p of pools) if (!POOL_KINDS.includes(p)) throw new Error(`unknown pool ${p} (known: ${POOL_KINDS.join(', ')})`);
for (const w of workloads) if (!WORKLOADS[w]) throw new Error(`unknown workload ${w} (known: ${Object.keys(WORKLOADS).join(', ')})`);
for (const p of policies)
  if (!PROCESS_POLICIES.includes(p))
    throw new Error(`unknown policy ${p} (known: ${PROCESS_POLICIES.join(', ')}; round-robin has no scheduler plugin)`);

/** With a precise policy in the run every engine publishes KV events, so its cells and the others run equal engines. */
const kvEvents = policies.some(needsKvEvents);
const fmtMs = (ms: number) => (ms === Infinity ? '∞' : Number.isFinite(ms) ? `${Math.round(ms)}` : '–');
const fmtPct = (x: number) => (Number.isFinite(x) ? `${(x * 100).toFixed(1)} %` : '–');
const f2 = (x: number) => (Number.isFinite(x) ? x.toFixed(2) : '–');
let net = 40;

/**
 * The pool's capacity for a workload (GPU-time requests/s): a closed loop keeps every answering engine's batch full
 * (max_num_seqs × 1.25 requests per engine in flight) through the least-request config, which favours no cache,
 * and the completion rate of the middle half of the run is taken.
 */
async function measureCapacity(pool: PoolKind, workload: WorkloadName): Promise<number> {
  const stack = await startClusterStack({ pool, engines, timeScale, scrapeIntervalMs, net: net++, kvEvents });
  try {
    await applyPolicy(stack.natsUrl, 'least-request', stack.schedulerLog);
    const answering = poolLayout(pool, engines).roles.filter((r) => r !== 'prefill').length;
    const concurrency = Math.ceil(answering * ENGINE.maxNumSeqs * 1.25);
    const requests = workloadRequests(WORKLOADS[workload], seed ^ 0xcafe, 1, 20_000);
    const real = await measureSaturation(stack.gatewayUrl, MODEL, requests, concurrency, capacitySeconds * 1000);
    return real * timeScale;
  } finally {
    await stack.close();
  }
}

async function main(): Promise<void> {
  const results: CellResult[] = [];
  const calibration: CalibrationRow[] = [];
  const machineRows: (string | number)[][] = [];
  const pickRows: (string | number)[][] = [];
  console.log(
    `# Cluster benchmark (real gateway, scheduler, pod-watcher, NATS; engine-sims with the vLLM V1 engine-core model)\n\n` +
      `${engines} GPUs per pool; engines: max_num_seqs ${ENGINE.maxNumSeqs}, ${ENGINE.maxNumBatchedTokens} tokens per step, ` +
      `KV ${ENGINE.kvCapacityTokens} tokens, encoder cache ${ENGINE.encoderCacheItems} images (${ENGINE.encoderPodCacheItems} on encoder pods); ` +
      `time scale ×${timeScale} (latencies below are GPU-equivalent: real ms / ${timeScale}); ${requestCount} requests per cell ` +
      `(first ${Math.round(warmup * 100)} % warm-up); pod-watcher scrape every ${scrapeIntervalMs} ms; seed ${seed}. Figures are provisional ` +
      `unless the machine check below shows the machine was not the bottleneck.`,
  );
  for (const pool of pools) {
    for (const w of workloads) {
      const spec = WORKLOADS[w];
      const capacity = args.capacity ? Number(args.capacity) : await measureCapacity(pool, w);
      const rows: (string | number)[][] = [];
      const mine: CellResult[] = [];
      for (const load of loads) {
        const requests = workloadRequests(spec, seed, load * capacity, requestCount);
        for (const policy of policies) {
          const cell = await runCell({
            pool,
            workload: spec,
            policy,
            load,
            capacity,
            engines,
            timeScale,
            requests,
            warmup,
            scrapeIntervalMs,
            net: net++,
            kvEvents,
          });
          results.push(cell);
          mine.push(cell);
          rows.push([
            `${Math.round(load * 100)} %`,
            policy,
            fmtMs(cell.ttftP50),
            fmtMs(cell.ttftP99),
            fmtMs(cell.e2eP50),
            f2(cell.goodput),
            `${cell.failed}/${cell.measured}${
              cell.failed > 0
                ? ` (${Object.entries(cell.failures)
                    .map(([st, n]) => `${st}×${n}`)
                    .join(' ')})`
                : ''
            }`,
            fmtPct(cell.prefixHit),
            fmtPct(cell.encoderHit),
            f2(cell.imbalance),
            `${f2(cell.cores.gateway + cell.cores.scheduler)} (${f2(cell.routerCpuMsPerRequest)} ms/req)`,
            ...(pool === 'aggregated' ? [] : [`${cell.prefillLegs} / ${cell.kvPulls}`]),
            ...(kvEvents
              ? [Number.isFinite(cell.keysComputed) ? `${fmtPct(cell.keyAgreement)} of ${cell.keysComputed}` : '–', fmtPct(cell.keyedShare)]
              : []),
          ]);
          machineRows.push([
            `${pool} · ${w} · ${Math.round(load * 100)} % · ${policy}`,
            f2(cell.cores.gateway),
            f2(cell.cores.scheduler),
            f2(cell.cores['pod-watcher']),
            f2(cell.cores.engines),
            f2(cell.cores.nats),
            f2(cell.cores['kv-indexer']),
            f2(cell.cores.bench),
            fmtPct(cell.machineBusy),
            fmtPct(cell.hostBusy),
            f2(cell.engineHostLagP99Ms),
            f2(cell.benchLagP99Ms),
          ]);
          const local = Object.entries(cell.localDecisions);
          for (const [profile, q] of Object.entries(cell.pickQuality.profiles)) {
            const share = (n: number) => `${Math.round((100 * n) / Math.max(1, q.picks))} %`;
            pickRows.push([
              `${pool} · ${w} · ${Math.round(load * 100)} % · ${policy}`,
              profile,
              q.picks,
              Object.entries(q.decider)
                .sort((a, b) => b[1] - a[1])
                .map(([scorer, n]) => `${scorer} ${share(n)}`)
                .join(', '),
              Object.entries(q.overruledByLoad)
                .map(([scorer, n]) => `${scorer} ${share(n)}`)
                .join(', ') || '–',
              local.length === 0 ? '0' : local.map(([reason, n]) => `${reason} ${n}`).join(', '),
            ]);
          }
          if (args.calibrate) {
            const sim = simulateCell(pool, spec, policy, engines, load * capacity, requestCount, seed, warmup);
            calibration.push({ cell, sim });
          }
        }
      }
      // The images do not depend on the rate: the same for every load.
      const ceiling = repeatCeiling(workloadRequests(spec, seed, capacity, requestCount), warmup);
      console.log(`\n### ${pool} · ${w}: ${spec.description}\n`);
      console.log(
        `capacity ${capacity.toFixed(1)} req/s (closed-loop saturation, least-request); offered ` +
          `${loads.map((l) => `${Math.round(l * 100)} % = ${(l * capacity).toFixed(1)} req/s`).join(', ')}; goodput = requests/s with ` +
          `TTFT ≤ ${spec.ttftSloMs} ms.` +
          (Number.isFinite(ceiling)
            ? ` Encoder-hit ceiling of this run: ${fmtPct(ceiling)} (measured items that repeat an image sent before).`
            : '') +
          `\n`,
      );
      console.log(
        markdownTable(
          [
            'load',
            'policy',
            'TTFT p50 ms',
            'TTFT p99 ms',
            'E2E p50 ms',
            'goodput/s',
            'failed',
            'prefix hit',
            'encoder hit',
            'imbalance',
            'router CPU cores',
            ...(pool === 'aggregated' ? [] : ['prefill legs / KV pulls']),
            ...(kvEvents ? ['key agreement', 'requests keyed'] : []),
          ],
          rows,
        ),
      );
      if (kvEvents) {
        console.log(
          `\nEvery engine publishes vLLM KV events from its block pool. For triad-precise: key agreement = share of the ` +
            `gateway's block keys (of N computed) an engine reported holding (triad_scheduler_kv_key_agreement_keys_total, whole run; ` +
            `near 100 % or the comparison means nothing), requests keyed = share of the gateway's tokenizations that gave ` +
            `keys (the engines' render endpoint names every image; a request without keys, e.g. a render call that timed ` +
            `out, is scored by the approximate fallback); router CPU includes the kv-indexer.`,
        );
      }
      if (pool !== 'aggregated' && mine.every((c) => c.prefillLegs === 0)) {
        console.log(`\n**No prefill leg ran in this ${pool} pool**: the prompts were too short for per-request disaggregation.`);
      }
    }
  }
  console.log(
    `\n### Machine check\n\nCPU cores used on average per process during the measured windows (the machine has ` +
      `${require('node:os').cpus().length}), the share of the machine they add up to (this run) and the share busy with ` +
      `anything (host busy, /proc/stat: other processes included), and the event-loop delay p99 of the engine host and ` +
      `of the load generator. An engine step lasts ≥ ${2 * timeScale} ms (real time), so lag well below that does not ` +
      `move the figures; host busy near 100 % or lag near a step means the machine, not the router, set the ` +
      `latencies: scale the load down (--time-scale up, --engines down) or run on a quiet machine.\n`,
  );
  console.log(
    markdownTable(
      [
        'cell',
        'gateway',
        'scheduler',
        'pod-watcher',
        'engines',
        'nats',
        'kv-indexer',
        'load gen',
        'this run',
        'host busy',
        'engine lag p99 ms',
        'load-gen lag p99 ms',
      ],
      machineRows,
    ),
  );
  if (pickRows.length > 0) {
    console.log(
      `\n### Pick quality\n\nFrom the scheduler's /debug/pick-quality over the whole cell (warm-up included): per ` +
        `profile, what decided each first choice (the scorer with the largest weighted lead over the runner-up) and how ` +
        `often each affinity scorer was overruled by its load bound, as shares of the picks; and the decisions the ` +
        `gateway made locally instead (triad_gateway_local_decisions_total by reason: timeout = over the schedule budget).\n`,
    );
    console.log(
      markdownTable(['cell', 'profile', 'picks', 'decided by', 'affinity overruled by load', 'gateway local decisions'], pickRows),
    );
  }
  const stepMs = 2 * timeScale;
  const busy = results.filter((c) => c.hostBusy > 0.9 || c.engineHostLagP99Ms > stepMs / 2);
  if (busy.length > 0) {
    console.log(
      `\n**The machine was a bottleneck in ${busy.length} of ${results.length} cells** (host busy > 90 % or engine ` +
        `event-loop lag p99 > half a ${stepMs} ms step): their latencies are upper bounds. Re-run on a quiet machine, or ` +
        `scale the load down (--time-scale ${timeScale * 2}, or fewer --engines).`,
    );
  }
  if (args.calibrate) {
    for (const row of calibration) {
      const same = (c: CellResult) => c.pool === row.cell.pool && c.workload === row.cell.workload && c.load === row.cell.load;
      const randomCell = results.find((c) => same(c) && c.policy === 'random');
      const randomSim = calibration.find((r) => same(r.cell) && r.cell.policy === 'random')?.sim;
      Object.assign(row, { ...(randomCell ? { randomCell } : {}), ...(randomSim ? { randomSim } : {}) });
    }
    console.log(
      `\n### Calibration: process benchmark vs discrete-event simulator (same requests, rate, pool, engines)\n\n` +
        `Ratios to random in the same run, hit ratios, absolute TTFT; dev = (process − sim) / sim, \`!\` beyond 10 %.\n`,
    );
    console.log(markdownTable(CALIBRATION_HEADERS, calibrationRows(calibration)));
  }
  if (args.json) writeFileSync(args.json, JSON.stringify({ engines, timeScale, requestCount, seed, results }, null, 2));
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err instanceof Error ? (err.stack ?? err.message) : String(err));
    process.exit(1);
  },
);
