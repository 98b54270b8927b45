// Routing quality in simulated time (issue 18): a pool of simulated engines (prefix cache, encoder cache, batching
// and queueing, KV capacity; docs/routing-benchmark.md) serves open-loop Poisson traffic at shares of its
// capacity; each policy routes the same seeded requests, the scheduler-backed ones through libs/scheduling's real
// code. Prints one Markdown table per workload and writes the figures as JSON (for routing-plot.ts).
// Run: npx tsx tools/bench/src/routing-quality.ts [--engines 16] [--requests 3000] [--loads 0.5,0.8,0.95]
//        [--workloads chat,multimodal,mixed] [--policies triad,random,...] [--seed 1] [--json FILE] [--smoke]
//        [--triad-config FILE.json] [--pools aggregated,pd,epd]
import { readFileSync, writeFileSync } from 'node:fs';
import { REALISTIC_COST } from './cluster-sim/cost-model';
import { GOAL_HEADERS, goalRows } from './cluster-sim/goals';
import { EXTRA_POLICIES, makePolicy, POLICY_NAMES, type PolicyName } from './cluster-sim/policy-set';
import { measureCapacity, poolLayout, POOL_KINDS, runSimulation, type PoolKind, type RunMetrics } from './cluster-sim/simulate';
import { WORKLOADS, type WorkloadName } from './cluster-sim/workload';
import { stringifyResults } from './lib/result-json';
import { markdownTable } from './lib/table';
import { parseToolArgs } from '@triad/testing';

const { values: args } = parseToolArgs({
  options: {
    engines: { type: 'string', default: '16' },
    requests: { type: 'string', default: '3000' },
    loads: { type: 'string', default: '0.5,0.8,0.95' },
    workloads: { type: 'string', default: 'chat,multimodal,mixed' },
    policies: { type: 'string', default: POLICY_NAMES.join(',') },
    seed: { type: 'string', default: '1' },
    json: { type: 'string' },
    smoke: { type: 'boolean', default: false },
    'triad-config': { type: 'string' },
    pools: { type: 'string', default: 'aggregated' },
  },
});

const engines = Number(args.engines);
const requests = args.smoke ? 400 : Number(args.requests);
const loads = args.loads.split(',').map(Number);
const workloads = args.workloads.split(',') as WorkloadName[];
const policies = args.policies.split(',') as PolicyName[];
const seed = Number(args.seed);
const pools = args.pools.split(',') as PoolKind[];
for (const p of pools) if (!POOL_KINDS.includes(p)) throw new Error(`unknown pool ${p} (known: ${POOL_KINDS.join(', ')})`);
// A scheduler config (JSON) for the `triad` policy instead of the built-in defaults, to try weights and args.
const triadConfig: unknown = args['triad-config'] === undefined ? undefined : JSON.parse(readFileSync(args['triad-config'], 'utf8'));
for (const w of workloads) if (!WORKLOADS[w]) throw new Error(`unknown workload ${w} (known: ${Object.keys(WORKLOADS).join(', ')})`);
for (const p of policies)
  if (!POLICY_NAMES.includes(p) && !EXTRA_POLICIES.includes(p)) throw new Error(`unknown policy ${p} (known: ${POLICY_NAMES.join(', ')})`);

const fmtMs = (ms: number): string =>
  ms === Infinity ? '∞' : Number.isFinite(ms) ? (ms >= 10_000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms)}`) : '–';
const fmtPct = (x: number): string => (Number.isFinite(x) ? `${(x * 100).toFixed(1)} %` : '–');

const results: RunMetrics[] = [];
const cpu0 = process.cpuUsage();
for (const pool of pools) {
  const layout = poolLayout(pool, engines);
  const shape =
    pool === 'aggregated'
      ? `${engines} aggregated engines`
      : `${layout.encoders > 0 ? `${layout.encoders} encoders + ` : ''}${layout.roles.filter((r) => r === 'prefill').length} prefill + ` +
        `${layout.roles.filter((r) => r === 'decode').length} decode pods`;
  for (const w of workloads) {
    const spec = WORKLOADS[w];
    const capacity = measureCapacity(spec, engines, REALISTIC_COST, seed, (e) => makePolicy('oracle', e), pool);
    const rows: (string | number)[][] = [];
    const mine: RunMetrics[] = [];
    for (const load of loads) {
      for (const p of policies) {
        const m = runSimulation((e) => makePolicy(p, e, triadConfig), {
          pool,
          workload: spec,
          capacity,
          engines,
          load,
          requests,
          seed,
          cost: REALISTIC_COST,
        });
        results.push(m);
        mine.push(m);
        rows.push([
          `${Math.round(load * 100)} %`,
          m.policy,
          fmtMs(m.ttftP50),
          fmtMs(m.ttftP99),
          fmtMs(m.e2eP50),
          fmtMs(m.e2eP99),
          m.goodput.toFixed(1),
          fmtPct(m.rejected),
          fmtPct(m.prefixHit),
          fmtPct(m.encoderHit),
          m.imbalance.toFixed(2),
          ...(pool === 'aggregated' ? [] : [fmtPct(m.skippedPrefill), ...(pool === 'epd' ? [fmtPct(m.localEncode)] : [])]),
        ]);
      }
    }
    const rate = mine.map((r) => `${Math.round(r.load * 100)} % = ${r.ratePerS.toFixed(1)} req/s`);
    console.log(`\n### ${pool} · ${w}: ${spec.description}\n`);
    console.log(
      `${shape}, ${requests} requests per cell (first 20 % warm-up), seed ${seed}; capacity ` +
        `${capacity.toFixed(1)} req/s (the oracle's saturated throughput); offered ${[...new Set(rate)].join(', ')}; ` +
        `goodput = requests/s with TTFT ≤ ${spec.ttftSloMs} ms.\n`,
    );
    console.log(
      markdownTable(
        [
          'load',
          'policy',
          'TTFT p50 ms',
          'TTFT p99 ms',
          'E2E p50 ms',
          'E2E p99 ms',
          'goodput/s',
          'refused',
          'prefix hit',
          'encoder hit',
          'imbalance',
          ...(pool === 'aggregated' ? [] : ['no prefill leg', ...(pool === 'epd' ? ['local encode'] : [])]),
        ],
        rows,
      ),
    );
  }
}
const goals = goalRows(results);
if (goals.length > 0) console.log(`\n### Goals (issue 18), this run\n\n${markdownTable(GOAL_HEADERS, goals)}`);
const cpu = process.cpuUsage(cpu0);
console.log(
  `\nsimulation CPU: ${((cpu.user + cpu.system) / 1e6).toFixed(1)} s (figures are simulated time: machine load does not change them)`,
);
if (args.json) writeFileSync(args.json, stringifyResults({ engines, requests, seed, results }));
