import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import {
  Buckets,
  EndpointRecordSchema,
  ModelRouteRecordSchema,
  ModelServerRecordSchema,
  endpointKey,
  objectKey,
  type EndpointRecord,
  type ModelServerRecord,
} from '@triad/bus';
import { connectBus } from '@triad/bus/client';
import { TRIAD_BIN, freePort, startNatsServer, waitFor, type NatsServerHandle } from '@triad/testing';
import { startDiscardingSink, type DiscardingSink } from './lib/discarding-sink';
import { cpuSeconds } from './lib/proc';

// TRIAD_BIN honours TRIAD_BENCH_BIN: the `triad` of another checkout (e.g. the commit before a change, for a
// before/after pair).
const SIM_HOST = resolve(__dirname, 'gateway-sims.ts');
export const BENCH_MODEL = 'bench-model';

/** A child process of the benchmark (engine-sim, scheduler, gateway). */
interface Child {
  readonly name: string;
  readonly proc: ChildProcess;
  stderr: string;
}

function startChild(
  name: string,
  args: string[],
  env: NodeJS.ProcessEnv = {},
  stdout: 'ignore' | number = 'ignore',
  nodeArgs: string[] = [],
  script: string[] = [TRIAD_BIN],
  launcher: readonly string[] = [],
): Child {
  // A launcher (e.g. valgrind and its flags) runs node itself, so the child's pid is the launcher's.
  const [command, ...prefix] = [...launcher, process.execPath];
  const proc = spawn(command, [...prefix, ...nodeArgs, ...script, ...args], {
    stdio: ['ignore', stdout, 'pipe'],
    env: { ...process.env, TRIAD_LOG_LEVEL: 'warn', ...env },
  });
  const child: Child = { name, proc, stderr: '' };
  proc.stderr?.on('data', (d: Buffer) => {
    child.stderr = (child.stderr + d.toString()).slice(-4000);
  });
  return child;
}

async function httpOk(url: string): Promise<boolean> {
  try {
    return (await fetch(url)).ok;
  } catch {
    return false;
  }
}

/** The processes of one benchmark run: nats-server, zero-latency engine-sims, the scheduler and the gateway. */
export interface GatewayStack {
  readonly gatewayUrl: string;
  /** Ops endpoints (`/metrics`) of the gateway and the scheduler. */
  readonly gatewayOpsUrl: string;
  /** The `--scheduling in-process` gateway, when asked for (`inProcessGateway`). */
  readonly inProcessGatewayUrl?: string;
  readonly schedulerOpsUrl: string;
  readonly natsUrl: string;
  /** Direct URLs of the sims, by name: agg, pd-p, pd-d, epd-e, epd-p, epd-d, paced. */
  readonly sims: Readonly<Record<string, string>>;
  /** CPU seconds (user + system) the named child has used so far (Linux /proc), e.g. `gateway`, `nats`. */
  cpuSeconds(name: string): number;
  /** Names of the processes `cpuSeconds` knows: every child plus `nats`. */
  readonly processes: readonly string[];
  /** Process id of a child (or `nats`). */
  pid(name: string): number | undefined;
  /** Where the gateways export their spans, with `features: 'all'`. */
  readonly traceSink?: DiscardingSink;
  close(): Promise<void>;
}

interface SimSpec {
  readonly name: string;
  readonly role: 'encode' | 'prefill' | 'decode' | 'both';
  readonly server: string;
  readonly recordRole: EndpointRecord['role'];
}

const SIMS: readonly SimSpec[] = [
  { name: 'agg', role: 'both', server: 'agg', recordRole: 'aggregated' },
  { name: 'pd-p', role: 'prefill', server: 'pd', recordRole: 'prefill' },
  { name: 'pd-d', role: 'decode', server: 'pd', recordRole: 'decode' },
  { name: 'epd-e', role: 'encode', server: 'epd', recordRole: 'encode' },
  { name: 'epd-p', role: 'prefill', server: 'epd', recordRole: 'prefill' },
  { name: 'epd-d', role: 'decode', server: 'epd', recordRole: 'decode' },
  // An engine that paces its tokens (realistic profile: 20 ms per token), as real engines do.
  { name: 'paced', role: 'both', server: 'paced', recordRole: 'aggregated' },
];

const SERVERS: Readonly<Record<string, ModelServerRecord['spec']>> = {
  agg: {
    model: BENCH_MODEL,
    inferenceEngine: 'vLLM',
    workloadSelector: { matchLabels: { app: 'agg' } },
    workloadPort: { port: 8000, protocol: 'http' },
  },
  paced: {
    model: BENCH_MODEL,
    inferenceEngine: 'vLLM',
    workloadSelector: { matchLabels: { app: 'paced' } },
    workloadPort: { port: 8000, protocol: 'http' },
  },
  pd: {
    model: BENCH_MODEL,
    inferenceEngine: 'vLLM',
    kvConnector: { type: 'nixl' },
    workloadPort: { port: 8000, protocol: 'http' },
    workloadSelector: { matchLabels: { app: 'pd' }, pdGroup: { groupKey: 'g', prefillLabels: { r: 'p' }, decodeLabels: { r: 'd' } } },
  },
  epd: {
    model: BENCH_MODEL,
    inferenceEngine: 'vLLM',
    pipelineMode: 'epd',
    kvConnector: { type: 'nixl' },
    workloadPort: { port: 8000, protocol: 'http' },
    // What the sims run (below): NIXL EC (shared storage with BENCH_EC_DIR) and --enable-mm-embeds on P/D.
    ecConnector: {
      type: process.env['BENCH_EC_DIR'] ? 'shared-storage' : 'nixl',
      enableMmEmbeds: true,
      maxEncoderBatch: 16,
      reencodeAttempts: 1,
    },
    workloadSelector: {
      matchLabels: { app: 'epd' },
      pdGroup: { groupKey: 'g', encodeLabels: { r: 'e' }, prefillLabels: { r: 'p' }, decodeLabels: { r: 'd' } },
    },
  },
};

/**
 * Starts the stack as child processes (`triad sim-engine`, `triad scheduler`, `triad gateway`) around a
 * nats-server, and writes the KV records the pod-watcher would: one ModelServer and ModelRoute per mode
 * (`agg`, `pd`, `epd` are the model names clients use) and one endpoint per sim.
 */
export interface GatewayStackOptions {
  readonly gatewayEnv?: NodeJS.ProcessEnv;
  readonly gatewayLogFd?: number;
  readonly gatewayNodeArgs?: string[];
  /** Extra node flags per child (`gateway`, `scheduler`, a sim name, or `sims` for the shared sim process). */
  readonly nodeArgs?: Readonly<Record<string, string[]>>;
  /**
   * `one` (default): every engine-sim in one child process (`sims`), as `triad up` hosts them; `each`: one
   * `triad sim-engine` process per sim.
   */
  readonly simProcesses?: 'one' | 'each';
  /**
   * How a decode sim pulls KV blocks from its prefill (engine-sim `nixlSideChannel`), with `simProcesses: 'one'`:
   * `in-process` (default; same checks, no HTTP exchange) or `http` (`POST /sim/nixl/pull`, as separate
   * processes always do).
   */
  readonly nixlPull?: 'http' | 'in-process';
  /** Also start a second gateway (`gateway-in-process`) with `--scheduling in-process` on the same state. */
  readonly inProcessGateway?: boolean;
  /** A command that runs the gateway's node (e.g. `valgrind --tool=callgrind ...`); its pid is the gateway's. */
  readonly gatewayLauncher?: readonly string[];
  /** The same for the scheduler service's node. */
  readonly schedulerLauncher?: readonly string[];
  /**
   * CPUs the gateways run on (`taskset -c LIST`), e.g. `1` while the bench itself runs under `taskset -c 0`: the
   * gateway then has a core of its own and the sims, scheduler, nats-server and wrk share the other. Not with
   * `gatewayLauncher`.
   */
  readonly gatewayCpus?: string;
  /** How long the stack may take to become ready (default 60 s; a gateway under valgrind needs minutes). */
  readonly readyTimeoutMs?: number;
  /**
   * `all` (gateway.ts, gateway-profile.ts): the gateways run as deployed with every per-request feature on, so no figure is bought by
   * turning one off: tracing at its default sampler (parentbased_always_on) exporting to a sink that discards the
   * spans, a `ModelRoute.spec.rateLimit` on every route (admission runs; the budget is far above the load), metrics
   * and outlier detection (on by default) and the EPD servers' `*_embeds` rewrite. `none`: tracing off and no
   * rateLimit (default here: the tracing and admission benchmarks set those themselves).
   */
  readonly features?: 'all' | 'none';
  /** The gateway's `--scheduling` (default: the scheduler service over NATS). */
  readonly gatewayScheduling?: 'in-process';
  /** Start the scheduler service (default true); an in-process-only stack runs without one, as such a deployment does. */
  readonly scheduler?: boolean;
}

/** The rateLimit every bench route carries with `features: 'all'`: admission runs, and never refuses. */
const BENCH_RATE_LIMIT = { inputTokensPerUnit: 1_000_000_000, outputTokensPerUnit: 1_000_000_000, unit: 'second' } as const;

export async function startGatewayStack(opts: GatewayStackOptions = {}): Promise<GatewayStack> {
  const children: Child[] = [];
  const nodeArgsOf = (name: string): string[] => opts.nodeArgs?.[name] ?? (name === 'gateway' ? (opts.gatewayNodeArgs ?? []) : []);
  // A benchmark script that crashes or is interrupted must not leave the stack running (orphans skew later runs).
  const killAll = () => {
    for (const c of children) if (c.proc.exitCode === null) c.proc.kill('SIGKILL');
  };
  const interrupted = () => {
    killAll();
    process.exit(130);
  };
  process.once('exit', killAll);
  process.once('SIGINT', interrupted);
  const ecDir = mkdtempSync(join(tmpdir(), 'triad-bench-ec-'));
  const allFeatures = opts.features === 'all';
  let nats: NatsServerHandle | undefined;
  let traceSink: DiscardingSink | undefined;
  const close = async () => {
    process.off('exit', killAll);
    process.off('SIGINT', interrupted);
    for (const c of children) c.proc.kill('SIGTERM');
    await Promise.all(children.map((c) => (c.proc.exitCode === null ? new Promise((r) => c.proc.once('exit', r)) : undefined)));
    await nats?.close();
    await traceSink?.close();
    rmSync(ecDir, { recursive: true, force: true });
  };
  try {
    nats = await startNatsServer();
    const sims: Record<string, string> = {};
    const ports: Record<string, number> = {};
    const hosted: { name: string; role: string; port: number; profile: string; ecConnector?: string; sharedEcDir?: string }[] = [];
    for (const s of SIMS) {
      ports[s.name] = await freePort();
      const profile = s.name === 'paced' ? 'realistic' : 'zero';
      sims[s.name] = `http://127.0.0.1:${ports[s.name]}`;
      // The EPD sims run the NIXL EC connector: the gateway and the newest reference proxy pass the encoder's handles
      // and the consumer pulls (in-process with one sim process); the classic proxy sends none, so the prefill
      // encodes locally, which costs a zero-latency sim nothing. No shared EC directory: its per-request
      // file writes are the simulator's cost, not the router's. `BENCH_EC_DIR=1` runs shared storage instead.
      const epd = s.server === 'epd' && s.role !== 'decode';
      const shared = !!process.env['BENCH_EC_DIR'] && epd;
      if (opts.simProcesses !== 'each') {
        const ec = epd ? (shared ? { sharedEcDir: ecDir } : { ecConnector: 'nixl' }) : {};
        hosted.push({ name: s.name, role: s.role, port: ports[s.name], profile, ...ec });
        continue;
      }
      const args = [
        'sim-engine',
        '--engine',
        'vllm',
        '--role',
        s.role,
        '--host',
        '127.0.0.1',
        '--port',
        String(ports[s.name]),
        '--model',
        BENCH_MODEL,
        '--latency-profile',
        profile,
        '--enable-mm-embeds',
      ];
      if (epd) args.push(...(shared ? ['--shared-ec-dir', ecDir] : ['--ec-connector', 'nixl']));
      children.push(startChild(s.name, args, {}, 'ignore', nodeArgsOf(s.name)));
    }
    if (hosted.length > 0) {
      const host = ['-e', `require(${JSON.stringify(require.resolve('tsx/cjs/api'))}).register(); require(${JSON.stringify(SIM_HOST)});`];
      const spec = { model: BENCH_MODEL, nixl: opts.nixlPull ?? 'in-process', sims: hosted };
      children.push(startChild('sims', [JSON.stringify(spec)], {}, 'ignore', nodeArgsOf('sims'), host));
    }
    const bus = await connectBus({ servers: nats.url, name: 'bench' });
    const [servers, routes, endpoints] = await Promise.all([
      bus.kv(Buckets.modelServers, ModelServerRecordSchema),
      bus.kv(Buckets.modelRoutes, ModelRouteRecordSchema),
      bus.kv(Buckets.endpoints, EndpointRecordSchema),
    ]);
    for (const [name, spec] of Object.entries(SERVERS)) {
      await servers.put(objectKey('default', name), {
        schemaVersion: 1,
        namespace: 'default',
        name,
        mode: name === 'agg' || name === 'paced' ? 'aggregated' : (name as 'pd' | 'epd'),
        spec,
      });
      await routes.put(objectKey('default', name), {
        schemaVersion: 1,
        namespace: 'default',
        name,
        spec: {
          modelName: name,
          rules: [{ targetModels: [{ modelServerName: name, weight: 100 }] }],
          ...(allFeatures ? { rateLimit: BENCH_RATE_LIMIT } : {}),
        },
      });
    }
    for (const s of SIMS) {
      const now = Date.now();
      await endpoints.put(endpointKey('default', s.server, s.name), {
        schemaVersion: 1,
        namespace: 'default',
        modelServer: s.server,
        pod: s.name,
        role: s.recordRole,
        ip: '127.0.0.1',
        port: ports[s.name],
        ...(s.server === 'agg' || s.server === 'paced' ? {} : { group: 'g1' }),
        engine: 'vLLM',
        ready: true,
        models: [BENCH_MODEL],
        updatedAt: now,
        metrics: { running: 0, waiting: 0, kvCacheUsage: 0, scrapedAt: now, stale: false },
      });
    }
    await bus.close();
    const schedulerMetrics = await freePort();
    const withScheduler = opts.scheduler !== false;
    if (withScheduler)
      children.push(
        startChild(
          'scheduler',
          ['scheduler', '--nats', nats.url, '--metrics-port', String(schedulerMetrics)],
          {},
          'ignore',
          nodeArgsOf('scheduler'),
          [TRIAD_BIN],
          opts.schedulerLauncher ?? [],
        ),
      );
    if (allFeatures) traceSink = await startDiscardingSink();
    const gatewayEnv: NodeJS.ProcessEnv = {
      ...(traceSink !== undefined ? { OTEL_EXPORTER_OTLP_ENDPOINT: traceSink.url } : {}),
      ...opts.gatewayEnv,
    };
    const pinned = opts.gatewayCpus !== undefined ? ['taskset', '-c', opts.gatewayCpus] : [];
    const gatewayPort = await freePort();
    const gatewayMetrics = await freePort();
    children.push(
      startChild(
        'gateway',
        [
          'gateway',
          ...(opts.gatewayScheduling === 'in-process' ? ['--scheduling', 'in-process'] : []),
          '--nats',
          nats.url,
          '--host',
          '127.0.0.1',
          '--port',
          String(gatewayPort),
          '--metrics-port',
          String(gatewayMetrics),
        ],
        gatewayEnv,
        opts.gatewayLogFd,
        nodeArgsOf('gateway'),
        [TRIAD_BIN],
        opts.gatewayLauncher ?? pinned,
      ),
    );
    const inProcessPort = opts.inProcessGateway === true ? await freePort() : undefined;
    const inProcessMetrics = inProcessPort !== undefined ? await freePort() : undefined;
    if (inProcessPort !== undefined) {
      children.push(
        startChild(
          'gateway-in-process',
          [
            'gateway',
            '--scheduling',
            'in-process',
            '--nats',
            nats.url,
            '--host',
            '127.0.0.1',
            '--port',
            String(inProcessPort),
            '--metrics-port',
            String(inProcessMetrics),
          ],
          gatewayEnv,
          'ignore',
          nodeArgsOf('gateway-in-process'),
          [TRIAD_BIN],
          pinned,
        ),
      );
    }
    const ready = async () => {
      if (inProcessMetrics !== undefined && !(await httpOk(`http://127.0.0.1:${inProcessMetrics}/readyz`))) return false;
      for (const c of children) if (c.proc.exitCode !== null) throw new Error(`${c.name} exited with ${c.proc.exitCode}: ${c.stderr}`);
      for (const url of Object.values(sims)) if (!(await httpOk(`${url}/health`))) return false;
      if (withScheduler && !(await httpOk(`http://127.0.0.1:${schedulerMetrics}/readyz`))) return false;
      return httpOk(`http://127.0.0.1:${gatewayMetrics}/readyz`);
    };
    await waitFor(ready, { timeoutMs: opts.readyTimeoutMs ?? 60_000, intervalMs: 200, what: 'benchmark stack ready' });
    const natsServer = nats;
    const pid = (name: string) => (name === 'nats' ? natsServer.pid : children.find((c) => c.name === name)?.proc.pid);
    const processes = [...children.map((c) => c.name), 'nats'];
    return {
      gatewayUrl: `http://127.0.0.1:${gatewayPort}`,
      gatewayOpsUrl: `http://127.0.0.1:${gatewayMetrics}`,
      ...(inProcessPort !== undefined ? { inProcessGatewayUrl: `http://127.0.0.1:${inProcessPort}` } : {}),
      schedulerOpsUrl: `http://127.0.0.1:${schedulerMetrics}`,
      natsUrl: nats.url,
      sims,
      cpuSeconds: (name: string) => cpuSeconds(pid(name)),
      processes,
      pid,
      ...(traceSink !== undefined ? { traceSink } : {}),
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}
