/**
 * The pod-watcher under a realistic fleet: time from a pod label change at the Kubernetes API to the updated KV
 * record (p50/p99), and the watcher's CPU and memory while it scrapes N pods every second. The watcher runs as
 * its own process (`triad pod-watcher --source kube`) against the fake API server of @triad/testing/kube and a
 * real nats-server; the pods are tiny listeners serving a zero-profile vLLM engine-sim's /metrics text. The
 * baseline row is a bare KV put seen by a KV watch: the floor under any label-change latency.
 *
 *   npx tsx tools/bench/src/pod-watcher.ts [--pods 2000] [--changes 100] [--window 10] [--interval 1000]
 *   npx tsx tools/bench/src/pod-watcher.ts --smoke      # 30 changes, 4 s windows
 *   add --profile DIR to write a CPU profile of the watcher process
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import { Buckets, EndpointRecordSchema, type EndpointRecord } from '@triad/bus';
import { connectBus } from '@triad/bus/client';
import { startNatsServer, waitFor, parseToolArgs } from '@triad/testing';
import { startFakeKubeServer } from '@triad/testing/kube';
import { procStats } from './lib/proc';
import { markdownTable } from './lib/table';
import { startWatcherProcess, stopWatcherProcess } from './lib/watcher-process';
import { benchPod, fleetObjects, startScrapeFleet } from './pod-watcher-fleet';

const { values: args } = parseToolArgs({
  options: {
    pods: { type: 'string', default: '2000' },
    changes: { type: 'string' },
    window: { type: 'string' },
    interval: { type: 'string', default: '1000' },
    smoke: { type: 'boolean', default: false },
    /** Write a V8 CPU profile of the watcher process into this directory. */
    profile: { type: 'string' },
  },
});
const PODS = Number(args.pods);
const CHANGES = Number(args.changes ?? (args.smoke ? 30 : 100));
const WINDOW_S = Number(args.window ?? (args.smoke ? 4 : 10));
const INTERVAL_MS = Number(args.interval);

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? NaN;
}

function startWatcher(natsUrl: string, kubeconfig: string): Promise<{ child: ChildProcess; opsPort: number }> {
  return startWatcherProcess(natsUrl, kubeconfig, ['--scrape-interval', String(INTERVAL_MS)], args.profile);
}

async function main(): Promise<void> {
  const nats = await startNatsServer();
  const kube = await startFakeKubeServer();
  const fleet = await startScrapeFleet(PODS);
  const dir = mkdtempSync(join(tmpdir(), 'triad-bench-pw-'));
  const kubeconfig = join(dir, 'kubeconfig');
  writeFileSync(kubeconfig, kube.kubeconfigYaml());
  for (const o of fleetObjects(fleet)) kube.apply(o);
  let watcher: ChildProcess | undefined;
  const bus = await connectBus({ servers: nats.url, name: 'bench' });
  try {
    // A reader's view of the endpoints bucket: PUT counts and waiters for a key reaching a role.
    const kv = await bus.kv(Buckets.endpoints, EndpointRecordSchema);
    const roles = new Map<string, string>();
    let puts = 0;
    const waiters = new Map<string, { role: string; resolve: (t: number) => void }>();
    await kv.watch({
      onChange: (c) => {
        if (c.op !== 'PUT') return;
        puts += 1;
        const record: EndpointRecord = c.value;
        roles.set(c.key, record.role);
        const w = waiters.get(c.key);
        if (w && w.role === record.role) {
          waiters.delete(c.key);
          w.resolve(performance.now());
        }
      },
    });

    const started = performance.now();
    const w = await startWatcher(nats.url, kubeconfig);
    watcher = w.child;
    await waitFor(async () => (await fetch(`http://127.0.0.1:${w.opsPort}/readyz`)).ok, {
      timeoutMs: 120_000,
      intervalMs: 100,
      what: 'watcher ready',
    });
    await waitFor(() => roles.size === PODS, { timeoutMs: 60_000, what: `${PODS} endpoint records` });
    const syncS = (performance.now() - started) / 1000;
    // Let the first scrapes of every pod land before measuring.
    await waitFor(() => fleet.scrapes() >= PODS * 2, { timeoutMs: 60_000, intervalMs: 100, what: 'two scrape rounds' });

    const heapMb = async () => {
      const text = await (await fetch(`http://127.0.0.1:${w.opsPort}/metrics`)).text();
      return Number(/^nodejs_heap_size_used_bytes (\S+)/m.exec(text)?.[1] ?? NaN) / 1024 / 1024;
    };
    const measureWindow = async (busy: boolean) => {
      fleet.busy = busy;
      const before = procStats(watcher!.pid!);
      const putsBefore = puts;
      const scrapesBefore = fleet.scrapes();
      const connsBefore = fleet.connections();
      const t0 = performance.now();
      await new Promise((r) => setTimeout(r, WINDOW_S * 1000));
      const secs = (performance.now() - t0) / 1000;
      const after = procStats(watcher!.pid!);
      return {
        heapMb: await heapMb(),
        cpuPct: ((after.cpuS - before.cpuS) / secs) * 100,
        rssMb: after.rssMb,
        peakMb: after.peakMb,
        writesPerS: (puts - putsBefore) / secs,
        scrapesPerS: (fleet.scrapes() - scrapesBefore) / secs,
        connectsPerS: (fleet.connections() - connsBefore) / secs,
      };
    };
    const idle = await measureWindow(false);
    const busy = await measureWindow(true);

    // Label changes while the fleet stays busy: one at a time, flipping a pod between prefill and decode.
    const latencies: number[] = [];
    for (let n = 0; n < CHANGES; n++) {
      const i = (n * 37) % PODS;
      const key = `default.bench.bench-${i}`;
      const next = roles.get(key) === 'prefill' ? 'decode' : 'prefill';
      const seen = new Promise<number>((resolve) => waiters.set(key, { role: next, resolve }));
      const t0 = performance.now();
      kube.apply(benchPod(i, fleet.ips[i], next));
      latencies.push((await seen) - t0);
    }
    fleet.busy = false;

    // Baseline: a bare KV put observed through a KV watch, on the same NATS server.
    const probe = await bus.kv('triad_bench_probe', z.object({ n: z.number() }));
    const probeWaiters = new Map<number, (t: number) => void>();
    const probeWatch = await probe.watch({ onChange: (c) => c.op === 'PUT' && probeWaiters.get(c.value.n)?.(performance.now()) });
    await probeWatch.synced;
    const base: number[] = [];
    for (let n = 0; n < CHANGES; n++) {
      const seen = new Promise<number>((resolve) => probeWaiters.set(n, resolve));
      const t0 = performance.now();
      await probe.put('k', { n });
      base.push((await seen) - t0);
    }
    probeWatch.stop();

    const sortedL = [...latencies].sort((a, b) => a - b);
    const sortedB = [...base].sort((a, b) => a - b);
    process.stdout.write(
      `\npod-watcher: ${PODS} pods, scrape interval ${INTERVAL_MS} ms, ${CHANGES} label changes, ${WINDOW_S} s ` +
        `windows; first full sync after ${syncS.toFixed(1)} s\n\n`,
    );
    process.stdout.write(
      `${markdownTable(
        ['path', 'changes', 'p50 ms', 'p99 ms', 'max ms'],
        [
          ['baseline: KV put → KV watch', String(CHANGES), percentile(sortedB, 50), percentile(sortedB, 99), sortedB.at(-1) ?? NaN],
          [
            'pod label change (API server) → KV record',
            String(CHANGES),
            percentile(sortedL, 50),
            percentile(sortedL, 99),
            sortedL.at(-1) ?? NaN,
          ],
        ],
      )}\n\n`,
    );
    const header = [
      'fleet metrics',
      'pods',
      'scrapes/s',
      'watcher CPU % of a core',
      'RSS MB',
      'peak RSS MB',
      'JS heap MB',
      'endpoint KV writes/s',
      'new connections/s',
    ];
    process.stdout.write(
      `${markdownTable(header, [
        [
          'steady (unchanged values)',
          String(PODS),
          idle.scrapesPerS,
          idle.cpuPct,
          idle.rssMb,
          idle.peakMb,
          idle.heapMb,
          idle.writesPerS,
          idle.connectsPerS,
        ],
        [
          'busy (values change every scrape)',
          String(PODS),
          busy.scrapesPerS,
          busy.cpuPct,
          busy.rssMb,
          busy.peakMb,
          busy.heapMb,
          busy.writesPerS,
          busy.connectsPerS,
        ],
      ])}\n`,
    );
  } finally {
    await stopWatcherProcess(watcher);
    await bus.close();
    await fleet.close();
    await kube.close();
    await nats.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`pod-watcher bench failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exitCode = 1;
});
