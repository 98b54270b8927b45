/**
 * 10,000 endpoints (issue 22): N simulated vLLM pods over M ModelServers (default 10,000 over 100), scraped by
 * one pod-watcher and then by three sharing the work (scrape shards), with a scheduler and a gateway following the
 * KV state. Every service is a real `triad` child process on one nats-server; the pods are canned /metrics
 * answers from one child process (scrape-fleet-server.ts) on 127.1.x.y addresses.
 *
 * Prints, per phase (1 replica is the baseline for 3) and per fleet mode (steady values, values changing on every
 * scrape): each pod-watcher's CPU (% of a core), RSS and scrape shard, scrapes/s, KV writes/s (endpoint records and
 * the replicas' scrape freshness); the scheduler's and gateway's RSS before any endpoint existed and with all of
 * them; and the scheduler's in-process decision latency over the endpoints as published (requests spread over every
 * ModelServer), next to the same scheduler holding a single ModelServer of the same size (the baseline: what the
 * other 9,900 endpoints cost), beside the running fleet and again once the pod-watchers stopped.
 *
 *   npx tsx tools/bench/src/scale-fleet.ts [--pods 10000] [--servers 100] [--window 10] [--interval 1000]
 *   npx tsx tools/bench/src/scale-fleet.ts --smoke        # 1,000 pods over 10 ModelServers, 4 s windows
 *   add --profile DIR to write CPU profiles of the pod-watchers
 *   add --watcher-node-options=--max-old-space-size=160 to run the pod-watchers with V8 options (with "=": a value
 *   starting with "--" is otherwise taken for a flag)
 *   The pod-watchers run as their Deployment runs them (infra/k8s/base/pod-watcher.yaml): with its NODE_OPTIONS and
 *   each in a memory cgroup of its container's memory limit, from which Node sizes the V8 heap (without root or a
 *   writable cgroup file system: --max-old-space-size of half the limit instead); --unlimited runs them with this
 *   machine's defaults instead (a heap limit of a quarter of its memory).
 *   add --logs DIR to keep the last output of every service there (warnings and errors: TRIAD_LOG_LEVEL=warn)
 *   add --bundle to run the services from the production bundle (dist/apps/cli/main.cjs, what the image runs;
 *   build it first: npx nx run @triad/cli:build) instead of the TypeScript sources through tsx
 *   add --bundle-path PATH to run the services from another build's main.cjs (an earlier commit's, as a baseline)
 *   add --source kube to have the pod-watchers list and watch a fake Kubernetes API server (real client-node
 *   informers) serving the pods as a cluster does (servedPod: spec, managed fields, container statuses; ~4 KB of
 *   JSON each), instead of reading a YAML file of pods with labels and an IP only (the default, as `npm start`)
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import { Buckets, EndpointRecordSchema, ModelServerRecordSchema, ScrapeFreshnessRecordSchema } from '@triad/bus';
import { connectBus, type Bus } from '@triad/bus/client';
import { SchedulerReplica } from '@triad/scheduling';
import { freePort, startNatsServer, waitFor, type TriadChild, parseToolArgs } from '@triad/testing';
import { servedPod, startFakeKubeServer, type FakeKubeServer, type KubeObject } from '@triad/testing/kube';
import { lineReader } from './lib/line-reader';
import { procStats } from './lib/proc';
import { markdownTable } from './lib/table';
import { podIp } from './pod-watcher-fleet';
import { timeDecisions } from './lib/decision-timing';
import { containerMemory, inCgroup, makeMemoryCgroup, nodeHeapMbFor, type MemoryCgroup } from './lib/as-deployed';

const REPO = join(__dirname, '..', '..', '..');

const { values: args } = parseToolArgs({
  options: {
    pods: { type: 'string' },
    servers: { type: 'string' },
    window: { type: 'string' },
    interval: { type: 'string', default: '1000' },
    replicas: { type: 'string', default: '3' },
    smoke: { type: 'boolean', default: false },
    profile: { type: 'string' },
    bundle: { type: 'boolean', default: false },
    'bundle-path': { type: 'string' },
    'watcher-node-options': { type: 'string' },
    logs: { type: 'string' },
    unlimited: { type: 'boolean', default: false },
    source: { type: 'string', default: 'file' },
  },
});
if (args.source !== 'file' && args.source !== 'kube') throw new Error(`--source: file or kube, not ${args.source}`);
const TRIAD =
  args['bundle-path'] ?? (args.bundle ? join(REPO, 'dist', 'apps', 'cli', 'main.cjs') : join(REPO, 'apps', 'cli', 'bin', 'triad.js'));
if ((args.bundle || args['bundle-path']) && !existsSync(TRIAD))
  throw new Error(`--bundle: ${TRIAD} is missing; build it with: npx nx run @triad/cli:build`);
const PODS = Number(args.pods ?? (args.smoke ? 1000 : 10_000));
const SERVERS = Number(args.servers ?? (args.smoke ? 10 : 100));
const WINDOW_S = Number(args.window ?? (args.smoke ? 4 : 10));
const INTERVAL_MS = Number(args.interval);
const REPLICAS = Number(args.replicas);
const PER_SERVER = Math.ceil(PODS / SERVERS);

/**
 * ModelServers `ms-0..`, a ModelRoute per server, and the pods (label `app: ms-k`) on the fleet's addresses: for the
 * fake API server, the pods as a cluster serves them; for the YAML file, pods with labels, an IP and readiness only.
 */
function clusterObjects(port: number, pods: 'served' | 'minimal'): KubeObject[] {
  const objects: KubeObject[] = [];
  for (let s = 0; s < SERVERS; s++) {
    objects.push({
      apiVersion: 'networking.serving.volcano.sh/v1alpha1',
      kind: 'ModelServer',
      metadata: { name: `ms-${s}`, namespace: 'default' },
      spec: { model: `model-${s}`, inferenceEngine: 'vLLM', workloadPort: { port }, workloadSelector: { matchLabels: { app: `ms-${s}` } } },
    });
    objects.push({
      apiVersion: 'networking.serving.volcano.sh/v1alpha1',
      kind: 'ModelRoute',
      metadata: { name: `route-${s}`, namespace: 'default' },
      spec: { modelName: `model-${s}`, rules: [{ targetModels: [{ modelServerName: `ms-${s}` }] }] },
    });
  }
  for (let i = 0; i < PODS; i++) {
    const name = `pod-${i}`;
    const labels = { app: `ms-${Math.floor(i / PER_SERVER)}` };
    objects.push(
      pods === 'served'
        ? servedPod(name, { labels, ip: podIp(i), port })
        : {
            apiVersion: 'v1',
            kind: 'Pod',
            metadata: { name, namespace: 'default', labels },
            status: { phase: 'Running', podIP: podIp(i), conditions: [{ type: 'Ready', status: 'True' }] },
          },
    );
  }
  return objects;
}

/** The cluster with minimal pods as a multi-document YAML file (each document JSON, which YAML reads as it is). */
function manifests(port: number): string {
  return clusterObjects(port, 'minimal')
    .map((o) => JSON.stringify(o))
    .join('\n---\n');
}

interface Fleet {
  readonly port: number;
  send(cmd: 'busy' | 'steady'): void;
  stats(): Promise<{ scrapes: number; connections: number }>;
  close(): Promise<void>;
}

async function startFleet(): Promise<Fleet> {
  const child = spawn(process.execPath, ['--import', 'tsx', join(__dirname, 'scrape-fleet-server.ts')], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const next = lineReader(child);
  const { port } = JSON.parse(await next()) as { port: number };
  return {
    port,
    send: (cmd) => child.stdin.write(`${cmd}\n`),
    stats: async () => {
      const reply = next();
      child.stdin.write('stats\n');
      return JSON.parse(await reply) as { scrapes: number; connections: number };
    },
    close: () =>
      new Promise<void>((resolve) => {
        child.once('exit', () => resolve());
        child.stdin.end();
      }),
  };
}

interface Service {
  readonly name: string;
  readonly child: TriadChild;
  readonly opsPort: number;
}

/** `triad <args>` as a child process (node flags first, e.g. a CPU profile), its output kept for errors. */
function spawnService(args: readonly string[], name: string, nodeFlags: readonly string[], cgroup?: MemoryCgroup): TriadChild {
  const argv = [...nodeFlags, TRIAD, ...args];
  const run = cgroup ? inCgroup(cgroup, process.execPath, argv) : { command: process.execPath, args: argv };
  const child = spawn(run.command, run.args, {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, TRIAD_LOG_LEVEL: 'warn', TRIAD_INSTANCE_ID: name },
  });
  let output = '';
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-20_000);
  };
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  return {
    process: child,
    output: () => output,
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    },
  };
}

async function startService(
  kind: 'pod-watcher' | 'scheduler' | 'gateway',
  name: string,
  natsUrl: string,
  extra: string[],
  nodeFlags: readonly string[] = [],
  cgroup?: MemoryCgroup,
): Promise<Service> {
  const opsPort = await freePort();
  const args = [kind, '--nats', natsUrl, '--metrics-port', String(opsPort), ...extra];
  if (kind === 'gateway') args.push('--host', '127.0.0.1', '--port', String(await freePort()));
  if (kind === 'scheduler') args.push('--instance-id', name);
  const child = spawnService(args, name, nodeFlags, cgroup);
  // Longer than waitReady's minute: a pod-watcher joining a loaded 10,000-pod fleet on a busy machine can take it.
  const died = new Promise<never>((_, reject) =>
    child.process.once('exit', (code) => reject(new Error(`${name} exited (${code}): ${child.output()}`))),
  );
  await Promise.race([
    died,
    waitFor(async () => (await fetch(`http://127.0.0.1:${opsPort}/readyz`).catch(() => undefined))?.ok, {
      what: `${name} ready`,
      timeoutMs: 300_000,
      intervalMs: 200,
    }),
  ]);
  return { name, child, opsPort };
}

/** A sample summed over the label sets of one metric family on a service's /metrics page. */
async function metric(service: Service, name: string): Promise<number> {
  const p = service.child.process;
  const url = `http://127.0.0.1:${service.opsPort}/metrics`;
  // Once more on failure: a kept-alive connection the ops server closed after its 5 s idle timeout fails the first try.
  const text = await fetch(url)
    .then((r) => r.text())
    .catch(() => fetch(url).then((r) => r.text()))
    .catch((err: unknown) => {
      throw new Error(
        `${service.name} /metrics: ${(err as Error).message} (exit ${p.exitCode ?? p.signalCode ?? 'none'})\n${service.child.output()}`,
      );
    });
  let sum = 0;
  for (const line of text.split('\n')) if (line.startsWith(`${name} `) || line.startsWith(`${name}{`)) sum += Number(line.split(' ').pop());
  return sum;
}

/** Writes so far to the buckets the scrape results go to: endpoint records and the replicas' scrape freshness. */
async function scrapeWrites(bus: Bus): Promise<number> {
  const jsm = await jetstreamManager(bus.nc);
  let n = 0;
  for (const bucket of [Buckets.endpoints, Buckets.scrapeFreshness]) {
    n += await jsm.streams.info(`KV_${bucket}`).then(
      (info) => info.state.last_seq,
      () => 0,
    );
  }
  return n;
}

interface WatcherRow {
  readonly name: string;
  readonly cpuPct: number;
  /** Failed scrapes (any reason) and changes of the replica set during the window. */
  readonly errors: number;
  readonly shardChanges: number;
  readonly rssMb: number;
  readonly heapMb: number;
  readonly targets: number;
}

interface Window {
  readonly watchers: WatcherRow[];
  readonly scrapesPerS: number;
  readonly writesPerS: number;
  readonly connectsPerS: number;
}

async function measure(fleet: Fleet, bus: Bus, watchers: readonly Service[], mode: 'steady' | 'busy'): Promise<Window> {
  fleet.send(mode);
  // One interval for the mode switch to reach every engine's next scrape.
  await new Promise((r) => setTimeout(r, INTERVAL_MS * 2));
  // Into steady values, every record changes once more (and, after a hand-over, the new owners write theirs): at
  // 10,000 engines those writes outlast two intervals on a busy machine, and would be counted as steady writes.
  if (mode === 'steady') {
    await waitFor(
      async () => {
        const before = await scrapeWrites(bus);
        await new Promise((r) => setTimeout(r, 1000));
        return (await scrapeWrites(bus)) - before < PODS / 100;
      },
      { timeoutMs: 60_000, intervalMs: 0, what: 'the switch to steady values written' },
    );
  }
  const before = watchers.map((w) => procStats(w.child.process.pid!));
  const errors0 = await Promise.all(watchers.map((w) => metric(w, 'triad_podwatcher_scrape_errors_total')));
  const changes0 = await Promise.all(watchers.map((w) => metric(w, 'triad_podwatcher_shard_changes_total')));
  const stats0 = await fleet.stats();
  const writes0 = await scrapeWrites(bus);
  const t0 = performance.now();
  await new Promise((r) => setTimeout(r, WINDOW_S * 1000));
  const secs = (performance.now() - t0) / 1000;
  const after = watchers.map((w) => procStats(w.child.process.pid!));
  const stats1 = await fleet.stats();
  const writes1 = await scrapeWrites(bus);
  const rows: WatcherRow[] = [];
  for (const [i, w] of watchers.entries()) {
    rows.push({
      name: w.name,
      cpuPct: (((after[i]?.cpuS ?? 0) - (before[i]?.cpuS ?? 0)) / secs) * 100,
      errors: (await metric(w, 'triad_podwatcher_scrape_errors_total')) - (errors0[i] ?? 0),
      shardChanges: (await metric(w, 'triad_podwatcher_shard_changes_total')) - (changes0[i] ?? 0),
      rssMb: after[i]?.rssMb ?? 0,
      targets: await metric(w, 'triad_podwatcher_shard_targets'),
      heapMb: (await metric(w, 'nodejs_heap_size_used_bytes')) / 1024 / 1024,
    });
  }
  return {
    watchers: rows,
    scrapesPerS: (stats1.scrapes - stats0.scrapes) / secs,
    writesPerS: (writes1 - writes0) / secs,
    connectsPerS: (stats1.connections - stats0.connections) / secs,
  };
}

/**
 * A SchedulerReplica loaded with what the buckets hold now (watches read to their end, then stopped); `only`: just
 * that ModelServer and its endpoints.
 */
async function loadFromKv(bus: Bus, only?: string): Promise<{ local: SchedulerReplica; servers: string[] }> {
  const local = new SchedulerReplica({ instanceId: 'bench' });
  const servers: string[] = [];
  const ms = await bus.kv(Buckets.modelServers, ModelServerRecordSchema);
  const w1 = await ms.watch({
    onChange: (c) => {
      if (c.op !== 'PUT' || (only !== undefined && c.value.name !== only)) return;
      local.applyModelServer({ op: 'PUT', value: c.value });
      servers.push(c.value.name);
    },
  });
  await w1.synced;
  w1.stop();
  const fresh = await bus.kv(Buckets.scrapeFreshness, ScrapeFreshnessRecordSchema);
  const w0 = await fresh.watch({ onChange: (c) => local.applyFreshness(c) });
  await w0.synced;
  w0.stop();
  const eps = await bus.kv(Buckets.endpoints, EndpointRecordSchema);
  const w2 = await eps.watch({
    onChange: (c) => {
      if (c.op === 'PUT' && (only === undefined || c.value.modelServer === only)) local.applyEndpoint({ op: 'PUT', value: c.value });
    },
  });
  await w2.synced;
  w2.stop();
  return { local, servers };
}

const WATCHER_HEADER = [
  'pod-watchers',
  'fleet',
  'replica',
  'shard (pods)',
  'CPU % of a core',
  'RSS MB',
  'JS heap used MB',
  'failed scrapes',
  'replica-set changes',
  'scrapes/s (all)',
  'KV writes/s, endpoints + freshness (all)',
  'new connections/s (all)',
];

function printWatchers(label: string, phase: { steady: Window; busy: Window }): void {
  const rows: (string | number)[][] = [];
  for (const mode of ['steady', 'busy'] as const) {
    const w = phase[mode];
    for (const r of w.watchers) {
      rows.push([
        label,
        mode === 'steady' ? 'steady values' : 'values change every scrape',
        r.name,
        r.targets,
        r.cpuPct,
        r.rssMb,
        r.heapMb,
        r.errors,
        r.shardChanges,
        w.scrapesPerS,
        w.writesPerS,
        w.connectsPerS,
      ]);
    }
  }
  process.stdout.write(`${markdownTable(WATCHER_HEADER, rows)}\n\n`);
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'triad-bench-scale-'));
  const nats = await startNatsServer();
  const fleet = await startFleet();
  const services: Service[] = [];
  const cgroups: MemoryCgroup[] = [];
  const bus = await connectBus({ servers: nats.url, name: 'bench' });
  let kube: FakeKubeServer | undefined;
  try {
    let source: string[];
    if (args.source === 'kube') {
      kube = await startFakeKubeServer();
      for (const o of clusterObjects(fleet.port, 'served')) kube.apply(o);
      writeFileSync(join(dir, 'kubeconfig'), kube.kubeconfigYaml());
      source = ['--source', 'kube', '--kubeconfig', join(dir, 'kubeconfig')];
    } else {
      writeFileSync(join(dir, 'cluster.yaml'), manifests(fleet.port));
      source = ['--source', `file:${join(dir, 'cluster.yaml')}`];
    }
    const scheduler = await startService('scheduler', 'scheduler-0', nats.url, []);
    const gateway = await startService('gateway', 'gateway-0', nats.url, []);
    services.push(scheduler, gateway);
    const idleRss = { scheduler: procStats(scheduler.child.process.pid!).rssMb, gateway: procStats(gateway.child.process.pid!).rssMb };

    // As deployed: the container's NODE_OPTIONS and memory limit (a cgroup each, else a heap limit as Node derives it).
    const deployed = containerMemory(join(REPO, 'infra', 'k8s', 'base', 'pod-watcher.yaml'), 'triad-pod-watcher', 'pod-watcher');
    const limitMb = Math.round(deployed.limitBytes / 1024 / 1024);
    let memoryNote = "this machine's Node defaults (--unlimited)";
    const startWatcher = async (i: number) => {
      let cgroup: MemoryCgroup | undefined;
      const flags: string[] = [];
      if (!args.unlimited) {
        cgroup = makeMemoryCgroup(`triad-bench-${process.pid}-pw-${i}`, deployed.limitBytes);
        if (cgroup) cgroups.push(cgroup);
        else flags.push(`--max-old-space-size=${nodeHeapMbFor(deployed.limitBytes)}`);
        flags.push(...deployed.nodeOptions);
        memoryNote = cgroup
          ? `as deployed: NODE_OPTIONS "${deployed.nodeOptions.join(' ')}", each in a ${limitMb} MiB memory cgroup`
          : `as deployed: NODE_OPTIONS "${deployed.nodeOptions.join(' ')}", heap sized for ${limitMb} MiB (no cgroup here)`;
      }
      const s = await startService(
        'pod-watcher',
        `pod-watcher-${i}`,
        nats.url,
        [...source, '--identity', `pw-${i}`, '--scrape-interval', String(INTERVAL_MS)],
        [
          ...flags,
          ...(args.profile ? ['--cpu-prof', `--cpu-prof-dir=${args.profile}`] : []),
          ...(args['watcher-node-options']?.split(/\s+/).filter(Boolean) ?? []),
        ],
        cgroup,
      );
      services.push(s);
      return s;
    };
    const t0 = performance.now();
    const watchers = [await startWatcher(0)];
    const kv = await bus.kv(Buckets.endpoints, EndpointRecordSchema);
    await waitFor(async () => (await kv.keys()).length >= PODS, { timeoutMs: 180_000, intervalMs: 1000, what: `${PODS} endpoint records` });
    const syncS = (performance.now() - t0) / 1000;
    process.stdout.write(
      `\n10,000-endpoint scale: ${PODS} pods over ${SERVERS} ModelServers, ${args.source === 'kube' ? 'pods as a cluster serves them from a fake Kubernetes API (client-node informers)' : 'pods from a YAML file (labels and IP only)'}, services ${args['bundle-path'] ? `from ${args['bundle-path']}` : args.bundle ? 'from the bundle' : 'through tsx'}, pod-watchers ${memoryNote}, scrape interval ${INTERVAL_MS} ms, ${WINDOW_S} s ` +
        `windows; first full sync by one pod-watcher after ${syncS.toFixed(1)} s\n\n`,
    );
    await waitFor(async () => (await fleet.stats()).scrapes >= PODS * 2, {
      timeoutMs: 120_000,
      intervalMs: 500,
      what: 'two scrape rounds',
    });
    const one = { steady: await measure(fleet, bus, watchers, 'steady'), busy: await measure(fleet, bus, watchers, 'busy') };
    printWatchers('1 replica (baseline)', one);

    for (let i = 1; i < REPLICAS; i++) watchers.push(await startWatcher(i));
    await waitFor(
      async () => {
        const sizes = await Promise.all(watchers.map((w) => metric(w, 'triad_podwatcher_shard_targets')));
        const members = await Promise.all(watchers.map((w) => metric(w, 'triad_podwatcher_shard_members')));
        return members.every((m) => m === REPLICAS) && sizes.reduce((a, b) => a + b, 0) === PODS;
      },
      { timeoutMs: 60_000, intervalMs: 500, what: `${REPLICAS} scrape shards covering ${PODS} pods` },
    );
    // Hand-over: the engines that moved are scraped and the shards republished (two intervals), then idle sockets age out.
    await new Promise((r) => setTimeout(r, 3 * INTERVAL_MS));
    const many = { steady: await measure(fleet, bus, watchers, 'steady'), busy: await measure(fleet, bus, watchers, 'busy') };
    printWatchers(`${REPLICAS} replicas`, many);
    fleet.send('steady');
    const fullRss = { scheduler: procStats(scheduler.child.process.pid!).rssMb, gateway: procStats(gateway.child.process.pid!).rssMb };
    const schedulerEndpoints = await metric(scheduler, 'triad_scheduler_endpoints');
    const mb = async (s: Service, name: string) => (await metric(s, name)) / 1024 / 1024;
    const gatewayHeap = {
      used: await mb(gateway, 'nodejs_heap_size_used_bytes'),
      total: await mb(gateway, 'nodejs_heap_size_total_bytes'),
      external: await mb(gateway, 'nodejs_external_memory_bytes'),
    };

    // Decisions, in this process, over the endpoints as published; baseline: one ModelServer of the same size alone.
    // Timed twice: beside the saturated fleet (every process of the benchmark shares this machine's two cores, so
    // its tail is mostly time slices lost to them), then with the same state once the pod-watchers stopped.
    const { local, servers } = await loadFromKv(bus);
    const first = servers[0];
    const alone = await loadFromKv(bus, first);
    const now = Date.now();
    const busy = { all: timeDecisions(local, servers, 20_000, now), single: timeDecisions(alone.local, [first], 20_000, now) };
    await Promise.all(watchers.map((w) => w.child.stop()));
    const quiet = { all: timeDecisions(local, servers, 20_000, now), single: timeDecisions(alone.local, [first], 20_000, now) };

    const out = process.stdout;
    out.write(
      `${markdownTable(
        ['process', `RSS MB, no endpoints`, `RSS MB, ${PODS} endpoints`, 'JS heap used / total MB', 'external MB', 'endpoints held'],
        [
          ['scheduler', idleRss.scheduler, fullRss.scheduler, '–', '–', schedulerEndpoints || '–'],
          [
            'gateway',
            idleRss.gateway,
            fullRss.gateway,
            `${gatewayHeap.used.toFixed(0)} / ${gatewayHeap.total.toFixed(0)}`,
            gatewayHeap.external,
            '–',
          ],
        ],
      )}\n\n`,
    );
    const rows: (string | number)[][] = [];
    for (const [machine, t] of [
      ['beside the running fleet', busy],
      ['pod-watchers stopped', quiet],
    ] as const) {
      rows.push([
        `baseline: one ModelServer of ${PER_SERVER} alone`,
        machine,
        alone.local.index.size,
        20_000,
        t.single.p50,
        t.single.p99,
        t.single.max,
        t.single.errors,
      ]);
      rows.push([
        `${SERVERS} ModelServers, requests spread over all`,
        machine,
        local.index.size,
        20_000,
        t.all.p50,
        t.all.p99,
        t.all.max,
        t.all.errors,
      ]);
    }
    out.write(
      `${markdownTable(['scheduler in-process decision', 'machine', 'endpoints held', 'decisions', 'p50 ms', 'p99 ms', 'max ms', 'errors'], rows)}\n`,
    );
  } finally {
    if (args.logs) for (const s of services) writeFileSync(join(args.logs, `${s.name}.log`), s.child.output());
    await Promise.all(services.map((s) => s.child.stop()));
    for (const c of cgroups) c.remove();
    await bus.close();
    await fleet.close();
    await kube?.close();
    await nats.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`scale-fleet bench failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exitCode = 1;
});
