/**
 * SGLang EPD encoder registries kept by the pod-watcher: how long from an encode pod becoming Ready to the encoder
 * being in a language-only server's registry and serving its first item, and from the pod's deletion to the encoder
 * leaving the registry. The watcher runs as its own process (`triad pod-watcher --source kube`) against the fake API
 * server of @triad/testing/kube and a real nats-server; the engines are engine-sims (an E→PD language-only server
 * with its registry listener, and one encoder per iteration). Baselines on a second language-only server that Triad
 * does not manage: an encoder registering itself (SGLang's `--encoder-register-urls`, a direct POST), unregistering
 * itself at exit (a direct DELETE), and a dead encoder left to SGLang's own health eviction.
 *
 *   npx tsx tools/bench/src/encoder-registry.ts [--iterations 20] [--evictions 3] [--scrape-interval 1000] [--health-interval 2000]
 *   npx tsx tools/bench/src/encoder-registry.ts --smoke      # 5 iterations, 1 eviction
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startSimEngine, type SimEngineHandle } from '@triad/engine-sim';
import { freePort, startNatsServer, waitFor, parseToolArgs } from '@triad/testing';
import { startFakeKubeServer, type KubeObject } from '@triad/testing/kube';
import { markdownTable } from './lib/table';
import { startWatcherProcess, stopWatcherProcess } from './lib/watcher-process';

const { values: args } = parseToolArgs({
  options: {
    iterations: { type: 'string' },
    evictions: { type: 'string' },
    'scrape-interval': { type: 'string', default: '1000' },
    /** SGLang's registry health-probe period on the servers (its default is 10 000 ms). */
    'health-interval': { type: 'string', default: '2000' },
    smoke: { type: 'boolean', default: false },
  },
});
const ITERATIONS = Number(args.iterations ?? (args.smoke ? 5 : 20));
const EVICTIONS = Number(args.evictions ?? (args.smoke ? 1 : 3));
const SCRAPE_MS = Number(args['scrape-interval']);
const HEALTH_MS = Number(args['health-interval']);
const POLL_MS = 2;
const API_VERSION = 'networking.serving.volcano.sh/v1alpha1';
const IMAGE = { type: 'image_url', image_url: { url: 'https://example.com/bench.png' } };

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? NaN;
}

function row(name: string, samples: readonly number[]): (string | number)[] {
  const s = [...samples].sort((a, b) => a - b);
  return [name, String(s.length), percentile(s, 50), percentile(s, 99), s.at(-1) ?? NaN];
}

const registryOf = (sim: SimEngineHandle) => `http://${sim.host}:${sim.encoderBootstrapPort}`;

/** A JSON request (the registry's routes, a chat completion); the answer is read and dropped. */
async function send(method: 'POST' | 'DELETE', url: string, body: unknown): Promise<void> {
  const res = await fetch(url, { method, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  await res.arrayBuffer();
}

async function listed(sim: SimEngineHandle): Promise<string[]> {
  return ((await (await fetch(`${registryOf(sim)}/list_encoder_urls`)).json()) as { encoder_urls: string[] }).encoder_urls;
}

/** Milliseconds from `t0` until `check` holds, polled every POLL_MS. */
async function timeUntil(t0: number, check: () => Promise<boolean>, what: string, timeoutMs = 60_000): Promise<number> {
  await waitFor(check, { intervalMs: POLL_MS, timeoutMs, what });
  return performance.now() - t0;
}

function encoderPod(i: number, ip: string): KubeObject {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: `enc-${i}`, namespace: 'default', labels: { app: 'vl', role: 'encode' } },
    status: { phase: 'Running', podIP: ip, conditions: [{ type: 'Ready', status: 'True' }] },
  };
}

async function main(): Promise<void> {
  const nats = await startNatsServer();
  const kube = await startFakeKubeServer();
  const dir = mkdtempSync(join(tmpdir(), 'triad-bench-registry-'));
  const kubeconfig = join(dir, 'kubeconfig');
  writeFileSync(kubeconfig, kube.kubeconfigYaml());
  const ports = { port: await freePort(), encodePort: await freePort() };
  const sims: SimEngineHandle[] = [];
  const sim = async (opts: Parameters<typeof startSimEngine>[0]) => {
    const s = await startSimEngine({ latencyProfile: 'zero', requestLogLimit: 0, ...opts });
    sims.push(s);
    return s;
  };
  const health = { encoderHealthCheckIntervalMs: HEALTH_MS, encoderHealthCheckTimeoutMs: Math.min(2_000, HEALTH_MS) };
  // E→PD: the language-only server prefills and decodes; Triad keeps its registry.
  const languageOnly = { engine: 'sglang', role: 'both', languageOnly: true, port: ports.port, encoderBootstrapPort: 0 } as const;
  const managed = await sim({ ...languageOnly, ...health, host: '127.2.0.1' });
  const unmanaged = await sim({ ...languageOnly, ...health, host: '127.2.0.2' });
  kube.apply({
    apiVersion: API_VERSION,
    kind: 'ModelServer',
    metadata: { name: 'vl', namespace: 'default' },
    spec: {
      model: 'sim-model',
      inferenceEngine: 'SGLang',
      pipelineMode: 'epd',
      workloadPort: { port: ports.port, encodePort: ports.encodePort },
      workloadSelector: {
        matchLabels: { app: 'vl' },
        pdGroup: { groupKey: 'group', encodeLabels: { role: 'encode' }, decodeLabels: { role: 'pd' } },
      },
    },
  });
  kube.apply({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'lang-0', namespace: 'default', labels: { app: 'vl', group: 'g1', role: 'pd' } },
    status: { phase: 'Running', podIP: managed.host, conditions: [{ type: 'Ready', status: 'True' }] },
  });
  let watcher: ChildProcess | undefined;
  const join_: number[] = [];
  const serve: number[] = [];
  const leave: number[] = [];
  const selfJoin: number[] = [];
  const selfLeave: number[] = [];
  const evict: number[] = [];
  try {
    const w = await startWatcherProcess(nats.url, kubeconfig, ['--scrape-interval', String(SCRAPE_MS)]);
    watcher = w.child;
    const ops = (path: string) => fetch(`http://127.0.0.1:${w.opsPort}${path}`);
    await waitFor(async () => (await ops('/readyz')).ok, { timeoutMs: 60_000, intervalMs: 50, what: 'watcher ready' });
    await waitFor(
      async () => {
        const body = (await (await ops('/debug/encoder-registries')).json()) as { registries: { reachable?: boolean }[] };
        return body.registries.some((r) => r.reachable === true);
      },
      { timeoutMs: 30_000, what: 'registry reached' },
    );

    for (let i = 0; i < ITERATIONS; i++) {
      const ip = `127.2.1.${i + 1}`;
      const encoder = await startSimEngine({
        engine: 'sglang',
        role: 'encode',
        host: ip,
        port: ports.encodePort,
        latencyProfile: 'zero',
        requestLogLimit: 0,
      });
      const url = `http://${ip}:${ports.encodePort}`;
      try {
        const t0 = performance.now();
        kube.apply(encoderPod(i, ip));
        join_.push(await timeUntil(t0, async () => (await listed(managed)).includes(url), `enc-${i} registered`));
        // Serving: requests go to the server until one of its items lands on the new encoder (the only one listed).
        serve.push(
          await timeUntil(
            t0,
            async () => {
              await send('POST', `${managed.url}/v1/chat/completions`, { messages: [{ role: 'user', content: [IMAGE] }], max_tokens: 1 });
              return (encoder.counters()['encoderItemsServed'] ?? 0) > 0;
            },
            `enc-${i} serving`,
          ),
        );
        const t1 = performance.now();
        kube.remove('v1', 'Pod', 'default', `enc-${i}`);
        leave.push(await timeUntil(t1, async () => !(await listed(managed)).includes(url), `enc-${i} unregistered`));

        // Baselines on the unmanaged server: the encoder registers and unregisters itself.
        const t2 = performance.now();
        await send('POST', `${registryOf(unmanaged)}/register_encoder_url`, { url });
        selfJoin.push(await timeUntil(t2, async () => (await listed(unmanaged)).includes(url), 'self-registered'));
        const t3 = performance.now();
        await send('DELETE', `${registryOf(unmanaged)}/unregister_encoder_url`, { url });
        selfLeave.push(await timeUntil(t3, async () => !(await listed(unmanaged)).includes(url), 'self-unregistered'));
        if (i < EVICTIONS) {
          // A dead encoder nobody unregisters leaves only by SGLang's health check (three failed probes).
          await send('POST', `${registryOf(unmanaged)}/register_encoder_url`, { url });
          await encoder.close();
          const t4 = performance.now();
          evict.push(await timeUntil(t4, async () => !(await listed(unmanaged)).includes(url), 'evicted', HEALTH_MS * 10 + 10_000));
        }
      } finally {
        await encoder.close();
      }
    }

    process.stdout.write(
      `\nencoder registries: ${ITERATIONS} encode pods, pod-watcher scrape interval ${SCRAPE_MS} ms ` +
        `(registry interval = scrape interval), SGLang health probe every ${HEALTH_MS} ms, registry polled every ${POLL_MS} ms\n\n`,
    );
    process.stdout.write(
      `${markdownTable(
        ['path', 'n', 'p50 ms', 'p99 ms', 'max ms'],
        [
          row('baseline: encoder registers itself (POST) → listed', selfJoin),
          row('Triad: encode pod Ready → registered', join_),
          row('Triad: encode pod Ready → first item served', serve),
          row('baseline: encoder unregisters itself (DELETE) → gone', selfLeave),
          row('Triad: encode pod deleted → unregistered', leave),
          row(`baseline: encoder dies, no unregister → SGLang evicts it (probe ${HEALTH_MS} ms)`, evict),
        ],
      )}\n`,
    );
  } finally {
    await stopWatcherProcess(watcher);
    await Promise.all(sims.map((s) => s.close()));
    await kube.close();
    await nats.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`encoder-registry bench failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exitCode = 1;
});
