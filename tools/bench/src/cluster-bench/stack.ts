import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { freePort, spawnTriad, startNatsServer, waitFor, waitReady, type NatsServerHandle, type TriadChild } from '@triad/testing';
import type { SimRole } from '@triad/engine-sim';
import { cpuSeconds } from '../lib/proc';
import { poolLayout, type PoolKind } from '../cluster-sim/simulate';
import { engineCoreOptions, engineLatency } from './engine-profile';
import type { EngineHostSpec, HostedEngine } from './engine-host';
import { engineKvEvents, kvEventsAnnotation, writeBenchTokenizer } from './kv-routing';

export const MODEL = 'bench';
const ENGINE_HOST = resolve(__dirname, 'engine-host.ts');

/** One engine of the pool as the pod-watcher sees it (a Pod on its own loopback address). */
export interface BenchEngine {
  readonly pod: string;
  readonly role: SimRole;
  readonly url: string;
}

export interface ClusterStack {
  readonly gatewayUrl: string;
  readonly gatewayOpsUrl: string;
  readonly schedulerOpsUrl: string;
  readonly natsUrl: string;
  readonly engines: readonly BenchEngine[];
  /** CPU seconds (user + system) of a process so far: gateway, scheduler, pod-watcher, engines, nats. */
  cpuSeconds(name: ProcessName): number;
  /** The engine host's latest event-loop delay p99 (ms), as it reports every second. */
  engineHostLagMs(): number;
  /** Lines the scheduler logged (JSON), newest last. */
  schedulerLog(): string;
  /** The engines' tokenizer directory when they publish KV events (the gateway computes keys with it). */
  readonly tokenizerDir: string | undefined;
  close(): Promise<void>;
}

export type ProcessName = 'gateway' | 'scheduler' | 'pod-watcher' | 'engines' | 'nats' | 'kv-indexer';

export interface ClusterStackOptions {
  readonly pool: PoolKind;
  readonly engines: number;
  readonly timeScale: number;
  /** Pod-watcher scrape interval (how stale the scheduler's engine metrics may be). */
  readonly scrapeIntervalMs: number;
  /** Third byte of the loopback addresses (127.0.<net>.x), so stacks of consecutive cells do not collide. */
  readonly net: number;
  /** The engines publish vLLM KV events (annotated on their pods); with `kvIndexer` a `triad kv-indexer` follows them. */
  readonly kvEvents?: boolean;
  readonly kvIndexer?: boolean;
}

const SERVER_SPECS: Record<PoolKind, string> = {
  aggregated: `  workloadSelector: {matchLabels: {app: bench}}`,
  pd: `  pipelineMode: pd
  kvConnector: {type: nixl}
  workloadSelector:
    matchLabels: {app: bench}
    pdGroup: {groupKey: group, prefillLabels: {role: prefill}, decodeLabels: {role: decode}}`,
  epd: `  pipelineMode: epd
  kvConnector: {type: nixl}
  ecConnector: {type: nixl, enableMmEmbeds: true}
  workloadSelector:
    matchLabels: {app: bench}
    pdGroup: {groupKey: group, encodeLabels: {role: encode}, prefillLabels: {role: prefill}, decodeLabels: {role: decode}}`,
};

/** The manifests a user would write: one ModelServer, one ModelRoute, one Pod per engine. */
export function manifests(
  pool: PoolKind,
  port: number,
  engines: readonly { pod: string; role: SimRole; ip: string }[],
  kvEventsPort?: number,
): string {
  // Encoders hold no KV cache: only the other engines publish events.
  const annotations = (role: SimRole) =>
    kvEventsPort === undefined || role === 'encode' ? '' : `, annotations: {${kvEventsAnnotation(kvEventsPort)}}`;
  const docs = [
    `apiVersion: networking.serving.volcano.sh/v1alpha1
kind: ModelServer
metadata: {name: bench-${pool}, namespace: default}
spec:
  model: ${MODEL}
  inferenceEngine: vLLM
  workloadPort: {port: ${port}}
${SERVER_SPECS[pool]}`,
    `apiVersion: networking.serving.volcano.sh/v1alpha1
kind: ModelRoute
metadata: {name: ${MODEL}, namespace: default}
spec:
  modelName: ${MODEL}
  rules:
    - name: default
      targetModels: [{modelServerName: bench-${pool}}]`,
    ...engines.map(
      (e) => `apiVersion: v1
kind: Pod
metadata: {name: ${e.pod}, namespace: default, labels: {app: bench, group: g1, role: ${e.role}}${annotations(e.role)}}
status: {phase: Running, podIP: ${e.ip}, conditions: [{type: Ready, status: "True"}]}`,
    ),
  ];
  return `${docs.join('\n---\n')}\n`;
}

/** Starts the engine host child and resolves once every engine listens. */
async function startEngineHost(spec: EngineHostSpec, onLag: (ms: number) => void): Promise<ChildProcess> {
  const child = spawn(
    process.execPath,
    [
      '-e',
      `require(${JSON.stringify(require.resolve('tsx/cjs/api'))}).register(); require(${JSON.stringify(ENGINE_HOST)});`,
      JSON.stringify(spec),
    ],
    { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env } },
  );
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
  const lines = createInterface({ input: child.stdout });
  return new Promise((resolveReady, reject) => {
    child.once('exit', (code) => reject(new Error(`engine host exited with ${code}: ${stderr}`)));
    lines.on('line', (line) => {
      const msg = JSON.parse(line) as { msg?: string; eventLoopP99Ms?: number };
      if (msg.msg === 'engines ready') resolveReady(child);
      if (msg.msg === 'engine host' && msg.eventLoopP99Ms !== undefined) onLag(msg.eventLoopP99Ms);
    });
  });
}

/**
 * The whole system as a user runs it: nats-server, the engines (one process, one loopback address per pod), the
 * pod-watcher reading a manifests file (`--source file:`) and scraping the engines' /metrics, the scheduler and
 * the gateway, each `triad <service>` as its own process. Resolves when the gateway routes the model.
 */
export async function startClusterStack(o: ClusterStackOptions): Promise<ClusterStack> {
  const layout = poolLayout(o.pool, o.engines);
  const roles: SimRole[] = [...new Array<SimRole>(layout.encoders).fill('encode'), ...layout.roles];
  const dir = mkdtempSync(join(tmpdir(), 'triad-cluster-bench-'));
  const port = await freePort();
  const engines = roles.map((role, i) => ({ pod: `${role}-${i}`, role, ip: `127.0.${o.net}.${i + 1}` }));
  const tokenizerDir = o.kvEvents ? writeBenchTokenizer(dir) : undefined;
  const kvEventsPort = tokenizerDir ? await freePort() : undefined;
  const hosted: HostedEngine[] = engines.map((e) => ({
    host: e.ip,
    role: e.role,
    latency: engineLatency(o.timeScale),
    engineCore: engineCoreOptions(e.role, o.timeScale),
    ...(o.pool === 'epd' && e.role !== 'decode' ? { ecConnector: 'nixl' as const } : {}),
    ...(tokenizerDir && kvEventsPort !== undefined && e.role !== 'encode'
      ? { kvEvents: engineKvEvents(e.ip, kvEventsPort, tokenizerDir) }
      : {}),
  }));
  let nats: NatsServerHandle | undefined;
  let host: ChildProcess | undefined;
  const services: TriadChild[] = [];
  let lag = NaN;
  const close = async () => {
    for (const s of [...services].reverse()) await s.stop();
    if (host && host.exitCode === null) {
      const h = host;
      h.kill('SIGTERM');
      await new Promise((r) => h.once('exit', r));
    }
    await nats?.close();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    nats = await startNatsServer();
    host = await startEngineHost({ model: MODEL, port, engines: hosted }, (ms) => (lag = ms));
    const file = join(dir, 'cluster.yaml');
    writeFileSync(file, manifests(o.pool, port, engines, kvEventsPort));
    const env = { TRIAD_LOG_LEVEL: 'info' };
    const start = async (args: string[]): Promise<{ ops: number; child: TriadChild }> => {
      const ops = await freePort();
      const child = spawnTriad([...args, '--nats', nats!.url, '--metrics-port', String(ops)], env);
      services.push(child);
      return { ops, child };
    };
    const gatewayPort = await freePort();
    // Started together (each waits for NATS and its peers by itself): a loaded machine takes seconds per start.
    const watcher = await start([
      'pod-watcher',
      '--source',
      `file:${file}`,
      '--identity',
      'bench',
      '--scrape-interval',
      `${o.scrapeIntervalMs}ms`,
    ]);
    const scheduler = await start(['scheduler', '--instance-id', 'bench-scheduler']);
    const gateway = await start(['gateway', '--host', '127.0.0.1', '--port', String(gatewayPort), '--no-access-log']);
    const indexer = o.kvIndexer ? await start(['kv-indexer', '--instance-id', 'bench-kv-indexer']) : undefined;
    await Promise.all(
      [[watcher, 'pod-watcher'], [scheduler, 'scheduler'], [gateway, 'gateway'], ...(indexer ? [[indexer, 'kv-indexer']] : [])].map(
        ([s, name]) => waitReady((s as typeof watcher).child, (s as typeof watcher).ops, `${name as string} ready`),
      ),
    );
    const schedulerOps = scheduler.ops;
    const gatewayOps = gateway.ops;
    const gatewayUrl = `http://127.0.0.1:${gatewayPort}`;
    await waitFor(
      async () => {
        const res = await fetch(`${gatewayUrl}/v1/models`).catch(() => undefined);
        return !!res?.ok && ((await res.json()) as { data?: { id: string }[] }).data?.some((m) => m.id === MODEL) === true;
      },
      { what: 'gateway routes the benchmark model', timeoutMs: 60_000, intervalMs: 200 },
    );
    const pids: Record<ProcessName, number | undefined> = {
      gateway: gateway.child.process.pid,
      scheduler: scheduler.child.process.pid,
      'pod-watcher': watcher.child.process.pid,
      engines: host.pid,
      nats: nats.pid,
      'kv-indexer': indexer?.child.process.pid,
    };
    return {
      gatewayUrl,
      gatewayOpsUrl: `http://127.0.0.1:${gatewayOps}`,
      schedulerOpsUrl: `http://127.0.0.1:${schedulerOps}`,
      natsUrl: nats.url,
      engines: engines.map((e) => ({ pod: e.pod, role: e.role, url: `http://${e.ip}:${port}` })),
      cpuSeconds: (name) => cpuSeconds(pids[name]),
      engineHostLagMs: () => lag,
      schedulerLog: () => scheduler.child.output(),
      tokenizerDir,
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}
