// Admission micro-benchmark: the per-request cost of authenticate + admit + release, in-process, with and
// without rate limits (memory store, NATS KV with and without leases, two scopes, fairness queue), against a
// baseline that does the same async hops with no admission at all. It is the baseline for the gateway
// benchmark (admission on vs off, goal ≤ 10 % of throughput).
// Run: npx tsx tools/bench/src/admission.ts [--smoke] [--requests N] [--concurrency C] [--no-nats]
import { Registry } from 'prom-client';
import { connectBus, type Bus } from '@triad/bus/client';
import { createAdmission, generateApiKey, hashApiKey, type Admission, type AdmissionConfigInput, type Identity } from '@triad/admission';
import { startNatsServer, type NatsServerHandle } from '@triad/testing';
import { markdownTable } from './lib/table';

interface BenchOptions {
  readonly requests: number;
  /** Each scenario runs this many times, interleaved with the others; the best run counts (shared machine). */
  readonly rounds: number;
  readonly concurrency: number;
  readonly nats: boolean;
}

function parseArgs(argv: readonly string[]): BenchOptions {
  const flag = (name: string): string | undefined => {
    const i = argv.indexOf(name);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const smoke = argv.includes('--smoke');
  return {
    requests: Number(flag('--requests') ?? (smoke ? 20_000 : 200_000)),
    rounds: Number(flag('--rounds') ?? (smoke ? 2 : 3)),
    concurrency: Number(flag('--concurrency') ?? 16),
    nats: !argv.includes('--no-nats'),
  };
}

interface RunResult {
  readonly perSecond: number;
  readonly p50us: number;
  readonly p99us: number;
  readonly rejected: number;
  readonly storeShare: number;
}

const percentile = (sorted: readonly number[], p: number): number =>
  sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? NaN;

/** `concurrency` loops, each doing one request after another, until `requests` are done; per-request latency. */
async function drive(requests: number, concurrency: number, once: () => Promise<boolean>): Promise<Omit<RunResult, 'storeShare'>> {
  for (let i = 0; i < Math.max(2000, requests / 4); i++) await once(); // JIT, key cache and lease warm-up
  const latencies: number[] = [];
  let started = 0;
  let rejected = 0;
  const t0 = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (started < requests) {
        started++;
        const a = process.hrtime.bigint();
        if (!(await once())) rejected++;
        latencies.push(Number(process.hrtime.bigint() - a) / 1000);
      }
    }),
  );
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  latencies.sort((x, y) => x - y);
  return { perSecond: requests / seconds, p50us: percentile(latencies, 0.5), p99us: percentile(latencies, 0.99), rejected };
}

async function storeShare(registry: Registry): Promise<number> {
  const values = (await registry.getSingleMetric('triad_admission_budget_path_total')?.get())?.values ?? [];
  const sum = (path: string): number => values.filter((v) => v.labels['path'] === path).reduce((s, v) => s + v.value, 0);
  const total = sum('local') + sum('store');
  return total === 0 ? 0 : sum('store') / total;
}

interface Scenario {
  readonly name: string;
  readonly config: AdmissionConfigInput;
  readonly routeLimit: boolean;
  readonly store: 'memory' | 'nats';
}

/** Limits far above the offered load: the admitted path is measured, never a 429. */
const ROUTE_LIMIT = { inputTokensPerUnit: 1_000_000_000, outputTokensPerUnit: 1_000_000_000, unit: 'minute' as const };

async function runScenario(
  s: Scenario,
  key: string,
  keys: AdmissionConfigInput['auth'],
  opts: BenchOptions,
  bus: Bus | undefined,
): Promise<RunResult> {
  const registry = new Registry();
  const config: AdmissionConfigInput = { ...s.config, auth: s.config.auth === undefined ? {} : keys };
  const admission: Admission = await createAdmission(config, { registry, ...(s.store === 'nats' && bus ? { bus } : {}) });
  const headers = { authorization: `Bearer ${key}` };
  const once = async (): Promise<boolean> => {
    const auth = await admission.authenticate(headers);
    if (!auth.ok) return false;
    const identity: Identity = auth.identity;
    const admitted = await admission.admit({
      identity,
      model: 'bench-model',
      rateLimit: s.routeLimit ? ROUTE_LIMIT : undefined,
      inputTokens: 100,
      maxTokens: 100,
    });
    if (!admitted.ok) return false;
    admitted.release({ inputTokens: 100, outputTokens: 60 });
    return true;
  };
  const result = await drive(opts.requests, opts.concurrency, once);
  const share = await storeShare(registry);
  await admission.close();
  return { ...result, storeShare: share };
}

async function baseline(opts: BenchOptions): Promise<RunResult> {
  // The same awaits the gateway does around admission (authenticate, admit), doing nothing.
  const once = async (): Promise<boolean> => {
    await Promise.resolve();
    await Promise.resolve();
    return true;
  };
  return { ...(await drive(opts.requests, opts.concurrency, once)), storeShare: 0 };
}

async function main(): Promise<void> {
  const opts = parseArgs(process.argv.slice(2));
  const { key, id } = generateApiKey();
  const keys = { apiKeys: { keys: [{ name: 'bench', id, hash: hashApiKey(key), labels: { tier: 'pro' } }] } };
  const tiers = { tiers: { pro: { inputTokensPerUnit: 1_000_000_000, unit: 'minute' as const } }, tierLabel: 'tier' };
  const scenarios: Scenario[] = [
    { name: 'admission, no auth, no limits', config: {}, routeLimit: false, store: 'memory' },
    { name: 'API key', config: { auth: {} }, routeLimit: false, store: 'memory' },
    { name: 'API key + route limit (memory)', config: { auth: {} }, routeLimit: true, store: 'memory' },
    {
      name: 'API key + route limit (NATS, lease)',
      config: { auth: {}, rateLimit: { store: { type: 'nats' } } },
      routeLimit: true,
      store: 'nats',
    },
    {
      name: 'API key + route + tier limit (NATS, lease)',
      config: { auth: {}, rateLimit: { store: { type: 'nats' }, ...tiers } },
      routeLimit: true,
      store: 'nats',
    },
    {
      name: 'API key + route limit (NATS, no lease)',
      config: { auth: {}, rateLimit: { store: { type: 'nats' }, lease: { maxFraction: 0 } } },
      routeLimit: true,
      store: 'nats',
    },
    {
      name: 'API key + route limit (NATS, lease) + fairness',
      config: { auth: {}, rateLimit: { store: { type: 'nats' } }, fairness: { enabled: true, maxConcurrent: 64 } },
      routeLimit: true,
      store: 'nats',
    },
  ];
  let server: NatsServerHandle | undefined;
  let bus: Bus | undefined;
  if (opts.nats) {
    server = await startNatsServer();
    bus = await connectBus({ servers: server.url, name: 'bench-admission' });
  }
  const best: (RunResult | undefined)[] = [];
  let base: RunResult | undefined;
  const better = (a: RunResult | undefined, b: RunResult): RunResult => (a && a.perSecond >= b.perSecond ? a : b);
  for (let round = 0; round < opts.rounds; round++) {
    base = better(base, await baseline(opts));
    for (const [i, s] of scenarios.entries()) {
      if (s.store === 'nats' && !bus) continue;
      best[i] = better(best[i], await runScenario(s, key, keys, opts, bus));
    }
  }
  const b = base as RunResult;
  const rows: (string | number)[][] = [['baseline: no admission (same awaits)', b.perSecond, b.p50us, b.p99us, '–', 0, 0]];
  scenarios.forEach((s, i) => {
    const r = best[i];
    if (!r) return;
    rows.push([
      s.name,
      r.perSecond,
      r.p50us,
      r.p99us,
      `${(r.storeShare * 100).toFixed(1)} %`,
      1e6 / r.perSecond - 1e6 / b.perSecond,
      r.rejected,
    ]);
  });
  await bus?.close();
  await server?.close();
  process.stdout.write(
    `\nAdmission path per request (authenticate + admit + release), ${opts.requests} requests, ${opts.concurrency} ` +
      `concurrent, in one process, best of ${opts.rounds}\n\n`,
  );
  const header = ['scenario', 'req/s', 'p50 µs', 'p99 µs', 'store round-trips', 'CPU µs/req over baseline', 'rejected'];
  process.stdout.write(`${markdownTable(header, rows)}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
