// Why Triad's encoder-cache hit ratio is what it is: the discrete-event simulator (same generator, seed, pool split
// and engine sizes as the process benchmark, `CLUSTER_COST`) runs a policy on an image workload, and every image
// item of the measured window is judged when its request is routed, against the caches the simulator can see: held
// by the chosen pod, a first send, a split (no pod held all of the request's images), passed over (held elsewhere,
// the chosen pod held none of them), or evicted everywhere (cluster-sim/miss-causes.ts). The simulator's hit ratios
// agree with the process benchmark's within 3 % (docs/routing-benchmark.md), so this is where its misses come from.
// A second table gives each run's TTFT, goodput and encoder hit, and how often the encoder-cache scorer decided the
// decode picks (PD/EPD: a decode pod encodes only for a request that skips its prefill leg).
// Run: npx tsx tools/bench/src/encoder-misses.ts [--pools aggregated,pd,epd] [--requests 1500] [--warmup 0.2]
//        [--seeds 1,2,3] [--policies triad,random] [--workload image-qa] [--load 0.7] [--triad-config FILE.json]
// A steady-state run measures after a long warm-up, e.g. `--requests 16000 --warmup 0.75` (the last 4,000).
import { readFileSync } from 'node:fs';
import { CLUSTER_COST } from './cluster-bench/engine-profile';
import { MISS_CAUSES, MissCauses } from './cluster-sim/miss-causes';
import { PickCounts } from './cluster-sim/pick-counts';
import { makePolicy, type PolicyName } from './cluster-sim/policy-set';
import { runSimulation, type PoolKind } from './cluster-sim/simulate';
import { WORKLOADS, type WorkloadName } from './cluster-sim/workload';
import { markdownTable } from './lib/table';
import { parseToolArgs } from '@triad/testing';

const { values: args } = parseToolArgs({
  options: {
    pools: { type: 'string', default: 'aggregated,pd' },
    requests: { type: 'string', default: '1500' },
    warmup: { type: 'string', default: '0.2' },
    seeds: { type: 'string', default: '1,2,3' },
    policies: { type: 'string', default: 'triad,random' },
    workload: { type: 'string', default: 'image-qa' },
    load: { type: 'string', default: '0.7' },
    'triad-config': { type: 'string' },
  },
});

/** The process benchmark's measured image-qa capacities (docs/routing-benchmark.md), req/s of GPU time. */
const CAPACITY: Readonly<Record<PoolKind, number>> = { aggregated: 79.4, pd: 54.6, epd: 48.6 };
const ENGINES = 8;

const requests = Number(args.requests);
// Share of each run's requests routed before measuring (their images are sent and cached, their items not counted).
const WARMUP = Number(args.warmup);
if (!(WARMUP >= 0 && WARMUP < 1)) throw new Error(`--warmup must be in [0, 1): ${args.warmup}`);
const seeds = args.seeds.split(',').map(Number);
const spec = WORKLOADS[args.workload as WorkloadName];
if (!spec) throw new Error(`unknown workload ${args.workload}`);
const triadConfig: unknown = args['triad-config'] ? JSON.parse(readFileSync(args['triad-config'], 'utf8')) : undefined;
const pct = (x: number) => (Number.isFinite(x) ? `${(x * 100).toFixed(1)} %` : '–');

const rows: string[][] = [];
const runRows: string[][] = [];
const ms = (x: number) => (Number.isFinite(x) ? x.toFixed(0) : '–');
const share = (n: number, of: number) => (of === 0 ? '–' : `${n} (${pct(n / of)})`);
for (const pool of args.pools.split(',') as PoolKind[]) {
  for (const policy of args.policies.split(',') as PolicyName[]) {
    const causes = new MissCauses(0);
    let hit = 0;
    for (const seed of seeds) {
      const judged = new MissCauses(Math.floor(requests * WARMUP));
      const picks = new PickCounts();
      const m = runSimulation(
        judged.wrap((p) => makePolicy(policy, p, policy === 'triad' ? triadConfig : undefined, picks)),
        {
          pool,
          workload: spec,
          capacity: Number(args.load) * CAPACITY[pool],
          engines: ENGINES,
          load: 1,
          requests,
          seed,
          cost: CLUSTER_COST,
          warmup: WARMUP,
        },
      );
      hit += m.encoderHit / seeds.length;
      const decode = picks.of('decode', 'encoder-cache');
      runRows.push([
        pool,
        policy,
        String(seed),
        ms(m.ttftP50),
        ms(m.ttftP99),
        m.goodput.toFixed(1),
        pct(m.encoderHit),
        String(decode.picks),
        share(decode.decided, decode.picks),
        share(decode.overruled, decode.picks),
      ]);
      for (const c of MISS_CAUSES) causes.counts[c] += judged.counts[c];
    }
    const shares = causes.shares();
    // First sends are misses wherever they go: 1 − their share is what any router could reach.
    rows.push([pool, policy, pct(hit), pct(1 - shares['first-send']), ...MISS_CAUSES.map((c) => pct(shares[c]))]);
  }
}
console.log(
  `# Encoder misses by cause (simulator, ${spec.name}, ${requests} requests per run, first ${WARMUP * 100} % warm-up, ` +
    `seeds ${seeds.join(', ')}, ${Number(args.load) * 100} % of the process benchmark's capacity, ${ENGINES} GPUs per pool)\n\n` +
    `Shares of the measured image items, judged when each request was routed; *encoder hit* is the engines' own count ` +
    `(an image inside a cached prefix needs no encoding, an image evicted before its request ran does).\n`,
);
console.log(markdownTable(['pool', 'policy', 'encoder hit', 'ceiling', ...MISS_CAUSES], rows));
console.log(
  `\n# Runs: latency, goodput, encoder hit and the decode picks' deciders\n\nTTFT in ms over the measured requests; ` +
    `goodput in requests/s within the workload's TTFT SLO; decode picks counted over the whole run (warm-up included): ` +
    `those the encoder-cache scorer decided (its score gave the chosen pod the largest lead), and those where its ` +
    `affinity was overruled by its load bound.\n`,
);
console.log(
  markdownTable(
    [
      'pool',
      'policy',
      'seed',
      'TTFT p50',
      'TTFT p99',
      'goodput',
      'encoder hit',
      'decode picks',
      'decided by encoder-cache',
      'overruled by load',
    ],
    runRows,
  ),
);
