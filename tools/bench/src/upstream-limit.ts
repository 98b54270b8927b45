/**
 * The per-endpoint connection limit in front of the engines (issue 22, "no hidden queue"): N concurrent SSE
 * streams through one gateway (`--scheduling in-process`, a child process) to two paced vLLM engine-sims. With
 * the old fixed pool of 256 sockets per engine only 512 streams reach the engines and the rest wait invisibly in
 * the gateway; with the new default (1024 per endpoint) all of them run in the engines, and whatever still waits
 * is on `triad_gateway_upstream_waiting`. Reports, a second into the streams: streams open at the engines,
 * waiting in the gateway (gauge), and, at the end, streams completed and the slowest stream.
 *
 *   npx tsx tools/bench/src/upstream-limit.ts [--streams 1000] [--tokens 150] [--ms-per-token 20]
 */
import { Buckets, EndpointRecordSchema, ModelRouteRecordSchema, ModelServerRecordSchema, endpointKey, objectKey } from '@triad/bus';
import { connectBus } from '@triad/bus/client';
import { startSimEngine, type SimEngineHandle } from '@triad/engine-sim';
import { startNatsServer, waitFor, parseToolArgs } from '@triad/testing';
import { startBenchGateway } from './lib/bench-gateway';
import { markdownTable } from './lib/table';

const { values: args } = parseToolArgs({
  options: {
    streams: { type: 'string', default: '1000' },
    tokens: { type: 'string', default: '150' },
    'ms-per-token': { type: 'string', default: '20' },
  },
});
const STREAMS = Number(args.streams);
const MODEL = 'sim-model';
const NS = 'default';

async function gauge(opsPort: number, name: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${opsPort}/metrics`)).text();
  let sum = 0;
  for (const line of text.split('\n')) if (line.startsWith(`${name}{`) || line.startsWith(`${name} `)) sum += Number(line.split(' ').pop());
  return sum;
}

const inference = (sim: SimEngineHandle) => sim.requests().filter((r) => r.path.startsWith('/v1/')).length;

async function run(label: string, limit: number | undefined, natsUrl: string, sims: SimEngineHandle[]): Promise<(string | number)[]> {
  const env: Record<string, string> = limit === undefined ? {} : { TRIAD_UPSTREAM_CONNECTIONS: String(limit) };
  const gw = await startBenchGateway(natsUrl, { args: ['--scheduling', 'in-process'], env });
  const opsPort = gw.opsPort;
  try {
    const url = `${gw.url}/v1/chat/completions`;
    const body = JSON.stringify({
      model: 'chat',
      stream: true,
      max_tokens: Number(args.tokens),
      messages: [{ role: 'user', content: 'hi' }],
    });
    await waitFor(
      async () =>
        (await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body })
          .then(async (r) => (await r.arrayBuffer(), r.status))
          .catch(() => 0)) === 200,
      { what: 'gateway serving', timeoutMs: 30_000 },
    );
    for (const s of sims) s.clearRequests();
    const started = performance.now();
    let slowest = 0;
    let ok = 0;
    const all = Array.from({ length: STREAMS }, async () => {
      const t0 = performance.now();
      const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      await res.arrayBuffer();
      if (res.status === 200) ok++;
      slowest = Math.max(slowest, performance.now() - t0);
    });
    // Every stream is sent once the engines hold as many as they will get; sample then.
    await waitFor(
      async () =>
        sims.reduce((n, s) => n + inference(s), 0) >= Math.min(STREAMS, 2 * (limit ?? 1024)) ||
        (await gauge(opsPort, 'triad_gateway_upstream_waiting')) + sims.reduce((n, s) => n + inference(s), 0) >= STREAMS,
      {
        what: 'streams dispatched',
        timeoutMs: 60_000,
        intervalMs: 50,
      },
    );
    const openAtEngines = sims.reduce((n, s) => n + inference(s), 0);
    const waiting = await gauge(opsPort, 'triad_gateway_upstream_waiting');
    await Promise.all(all);
    const wall = performance.now() - started;
    return [
      label,
      String(limit ?? 1024),
      String(STREAMS),
      String(openAtEngines),
      String(waiting),
      `${ok}/${STREAMS}`,
      Math.round(slowest),
      Math.round(wall),
    ];
  } finally {
    await gw.child.stop();
  }
}

async function main(): Promise<void> {
  const nats = await startNatsServer();
  const latency = { decodeMsPerToken: Number(args['ms-per-token']) };
  const sims = [
    await startSimEngine({
      engine: 'vllm',
      role: 'both',
      host: '127.0.44.1',
      model: MODEL,
      latencyProfile: 'zero',
      latency,
      requestLogLimit: 100_000,
    }),
    await startSimEngine({
      engine: 'vllm',
      role: 'both',
      host: '127.0.44.2',
      model: MODEL,
      latencyProfile: 'zero',
      latency,
      requestLogLimit: 100_000,
    }),
  ];
  const bus = await connectBus({ servers: nats.url, name: 'bench' });
  try {
    const servers = await bus.kv(Buckets.modelServers, ModelServerRecordSchema);
    const routes = await bus.kv(Buckets.modelRoutes, ModelRouteRecordSchema);
    const endpoints = await bus.kv(Buckets.endpoints, EndpointRecordSchema);
    await servers.put(objectKey(NS, 'agg'), {
      schemaVersion: 1,
      namespace: NS,
      name: 'agg',
      mode: 'aggregated',
      spec: {
        model: MODEL,
        inferenceEngine: 'vLLM',
        workloadSelector: { matchLabels: { app: 'agg' } },
        workloadPort: { port: sims[0]?.port, protocol: 'http' },
      },
    });
    await routes.put(objectKey(NS, 'chat'), {
      schemaVersion: 1,
      namespace: NS,
      name: 'chat',
      spec: { modelName: 'chat', rules: [{ targetModels: [{ modelServerName: 'agg', weight: 100 }] }] },
    });
    for (const [i, sim] of sims.entries()) {
      await endpoints.put(endpointKey(NS, 'agg', `agg-${i}`), {
        schemaVersion: 1,
        namespace: NS,
        modelServer: 'agg',
        pod: `agg-${i}`,
        role: 'aggregated',
        ip: sim.host,
        port: sim.port,
        engine: 'vLLM',
        ready: true,
        models: [MODEL],
        updatedAt: Date.now(),
        metrics: { running: 0, waiting: 0, kvCacheUsage: 0, scrapedAt: Date.now(), stale: false },
      });
    }
    const rows = [
      await run('before: fixed 256 sockets per engine', 256, nats.url, sims),
      await run('after: default limit (1024 per endpoint)', undefined, nats.url, sims),
    ];
    process.stdout.write(
      `\n### ${STREAMS} concurrent SSE streams to two paced engines (${args.tokens} tokens at ${args['ms-per-token']} ms)\n\n`,
    );
    process.stdout.write(
      `${markdownTable(
        [
          'gateway',
          'limit per endpoint',
          'streams',
          'open at the engines',
          'waiting in the gateway (gauge)',
          'completed',
          'slowest stream ms',
          'all done ms',
        ],
        rows,
      )}\n`,
    );
  } finally {
    await bus.close();
    await Promise.all(sims.map((s) => s.close()));
    await nats.close();
  }
}

void main().catch((err: unknown) => {
  process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
