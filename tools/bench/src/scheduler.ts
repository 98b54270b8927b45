// Scheduler benchmark: decision latency p50/p99 in-process and over NATS request-reply (one replica in a child
// process), for 100/1,000/10,000 endpoints, aggregated/pd/epd (2 images per epd request), single and batched.
// Run: npx tsx tools/bench/src/scheduler.ts [--smoke] [--sizes 100,1000] [--modes pd,epd] [--no-nats]
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Buckets, DispatchBatchSchema, EndpointRecordSchema, ModelServerRecordSchema, Subjects, endpointKey, objectKey } from '@triad/bus';
import { connectBus, type Bus } from '@triad/bus/client';
import { SchedulerReplica } from '@triad/scheduling';
import { freePort, startNatsServer, waitFor } from '@triad/testing';
import { markdownTable } from './lib/table';
import { RequestStream, buildCluster, inflightSnapshot, percentile, type BenchMode, type Cluster } from './scheduler-cluster';
import { loadBatched, loadSingle, type LoadResult } from './scheduler-nats';

interface BenchOptions {
  readonly sizes: number[];
  readonly modes: BenchMode[];
  readonly nats: boolean;
  readonly iterations: number;
  readonly natsMs: number;
  readonly clients: number;
}

function parseArgs(argv: readonly string[]): BenchOptions {
  const flag = (name: string): string | undefined => {
    const i = argv.indexOf(name);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const smoke = argv.includes('--smoke');
  return {
    sizes: (flag('--sizes') ?? '100,1000,10000').split(',').map(Number),
    modes: (flag('--modes') ?? 'aggregated,pd,epd').split(',') as BenchMode[],
    nats: !argv.includes('--no-nats'),
    iterations: smoke ? 400 : 5000,
    natsMs: smoke ? 1000 : 5000,
    clients: 32,
  };
}

type Row = (string | number)[];
const row = (size: number | string, mode: string, path: string, r: Pick<LoadResult, 'p50ms' | 'p99ms' | 'perSecond'>): Row => [
  size,
  mode,
  path,
  r.p50ms,
  r.p99ms,
  r.perSecond,
];

/** Times `scheduler.schedule` alone, one request at a time (what the gateway's local fallback pays). */
function inProcess(mode: BenchMode, size: number, iterations: number): LoadResult {
  const now = Date.now();
  const local = new SchedulerReplica({ instanceId: 'bench' });
  const cluster = buildCluster(mode, size, now);
  local.applyModelServer({ op: 'PUT', value: cluster.modelServer });
  for (const e of cluster.endpoints) local.applyEndpoint({ op: 'PUT', value: e });
  local.applyDispatch(
    { v: 1, gateway: 'bench', seq: 0, events: [], inflight: inflightSnapshot(cluster), snapshotIntervalMs: 3_600_000 },
    now,
  );
  const stream = new RequestStream(mode, size);
  let errors = 0;
  for (let i = 0; i < Math.min(2000, iterations); i++) local.schedule(stream.next(), now); // JIT warm-up
  const latencies: number[] = [];
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < iterations; i++) {
    const request = stream.next();
    const a = process.hrtime.bigint();
    if (!local.schedule(request, now).ok) errors++;
    latencies.push(Number(process.hrtime.bigint() - a) / 1e6);
  }
  const elapsed = Number(process.hrtime.bigint() - t0) / 1e6;
  latencies.sort((x, y) => x - y);
  return {
    p50ms: percentile(latencies, 50),
    p99ms: percentile(latencies, 99),
    perSecond: (iterations / elapsed) * 1000,
    decisions: iterations,
    errors,
  };
}

async function seed(bus: Bus, clusters: readonly Cluster[]): Promise<void> {
  const servers = await bus.kv(Buckets.modelServers, ModelServerRecordSchema);
  const endpoints = await bus.kv(Buckets.endpoints, EndpointRecordSchema);
  for (const c of clusters) {
    await servers.put(objectKey(c.modelServer.namespace, c.modelServer.name), c.modelServer);
    for (let i = 0; i < c.endpoints.length; i += 500) {
      await Promise.all(c.endpoints.slice(i, i + 500).map((e) => endpoints.put(endpointKey(e.namespace, e.modelServer, e.pod), e)));
    }
    bus.publish(Subjects.dispatch, DispatchBatchSchema, {
      v: 1,
      gateway: `bench-${c.modelServer.name}`,
      seq: 0,
      events: [],
      inflight: inflightSnapshot(c),
      snapshotIntervalMs: 3_600_000,
    });
  }
}

async function startWorker(kind: 'service' | 'echo', natsUrl: string, configFile: string): Promise<ChildProcess> {
  const port = await freePort();
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', join(__dirname, 'scheduler-worker.ts'), kind, natsUrl, String(port), configFile],
    { stdio: ['ignore', 'inherit', 'inherit'] },
  );
  await waitFor(async () => (await fetch(`http://127.0.0.1:${port}/readyz`)).ok, {
    timeoutMs: 180_000,
    intervalMs: 200,
    what: `${kind} worker ready`,
  });
  return child;
}

function stopWorker(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null) return resolve();
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
  });
}

async function overNats(opts: BenchOptions, configFile: string, rows: Row[]): Promise<void> {
  {
    // Baseline: the same round-trips answered without scheduling.
    const nats = await startNatsServer();
    const bus = await connectBus({ servers: nats.url, name: 'bench-client' });
    const echo = await startWorker('echo', nats.url, configFile);
    const stream = new RequestStream('aggregated', 100);
    rows.push(
      row('–', '–', `NATS echo baseline, single ×${opts.clients}`, await loadSingle(bus, () => stream.next(), opts.clients, opts.natsMs)),
    );
    rows.push(
      row('–', '–', `NATS echo baseline, batched ×${opts.clients}`, await loadBatched(bus, () => stream.next(), opts.clients, opts.natsMs)),
    );
    await stopWorker(echo);
    await bus.close();
    await nats.close();
  }
  for (const size of opts.sizes) {
    const nats = await startNatsServer();
    const bus = await connectBus({ servers: nats.url, name: 'bench-client' });
    await seed(
      bus,
      opts.modes.map((m) => buildCluster(m, size, Date.now())),
    );
    const worker = await startWorker('service', nats.url, configFile);
    for (const mode of opts.modes) {
      const stream = new RequestStream(mode, size);
      const single = await loadSingle(bus, () => stream.next(), opts.clients, opts.natsMs);
      const batched = await loadBatched(bus, () => stream.next(), opts.clients, opts.natsMs);
      if (single.errors + batched.errors > 0) {
        process.stderr.write(`warning: ${single.errors + batched.errors} failed decisions (${mode}, ${size})\n`);
      }
      rows.push(row(size, mode, `NATS single ×${opts.clients}`, single), row(size, mode, `NATS batched ×${opts.clients}`, batched));
    }
    await stopWorker(worker);
    await bus.close();
    await nats.close();
  }
}

async function main(): Promise<void> {
  const opts = parseArgs(process.argv.slice(2));
  const rows: Row[] = [];
  for (const size of opts.sizes) {
    for (const mode of opts.modes) {
      const r = inProcess(mode, size, opts.iterations);
      if (r.errors > 0) process.stderr.write(`warning: ${r.errors} failed decisions in-process (${mode}, ${size})\n`);
      rows.push(row(size, mode, 'in-process', r));
    }
  }
  if (opts.nats) {
    const dir = mkdtempSync(join(tmpdir(), 'triad-bench-sched-'));
    const configFile = join(dir, 'scheduler.yaml');
    // Metrics are seeded once; a long staleness bound keeps them "fresh" for the whole run.
    writeFileSync(configFile, 'plugins:\n  - {type: stale-metrics, args: {maxAgeMs: 86400000}}\n');
    try {
      await overNats(opts, configFile, rows);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  process.stdout.write(`${markdownTable(['endpoints', 'mode', 'path', 'p50 ms', 'p99 ms', 'decisions/s'], rows)}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`bench scheduler: ${(err as Error).stack ?? String(err)}\n`);
  process.exitCode = 1;
});
