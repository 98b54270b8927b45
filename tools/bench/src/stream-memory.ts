/**
 * Gateway memory per concurrent stream (issue 22): N SSE streams through one gateway (`--scheduling in-process`,
 * a child process) to paced vLLM engine-sims, and N streams whose clients stop reading after the headers while
 * fast engines keep generating (backpressure must bound what the gateway holds). Each scenario gets a fresh
 * gateway whose idle RSS, after a warm-up, is the baseline of that row; the RSS under load is the highest sampled
 * (every 100 ms) once every stream was open.
 *
 *   npx tsx tools/bench/src/stream-memory.ts [--streams 1000,5000] [--tokens 40] [--ms-per-token 400] [--stalled 1000]
 *   npx tsx tools/bench/src/stream-memory.ts --smoke     # 200 streams, 100 stalled
 */
import { Agent, request, type IncomingMessage } from 'node:http';
import { Buckets, EndpointRecordSchema, ModelRouteRecordSchema, ModelServerRecordSchema, endpointKey, objectKey } from '@triad/bus';
import { connectBus, type Bus } from '@triad/bus/client';
import { startSimEngine, type SimEngineHandle } from '@triad/engine-sim';
import { startNatsServer, waitFor, parseToolArgs } from '@triad/testing';
import { startBenchGateway, type BenchGateway } from './lib/bench-gateway';
import { procStats } from './lib/proc';
import { markdownTable } from './lib/table';

const { values: args } = parseToolArgs({
  options: {
    streams: { type: 'string' },
    stalled: { type: 'string' },
    tokens: { type: 'string', default: '40' },
    'ms-per-token': { type: 'string', default: '400' },
    'stalled-tokens': { type: 'string', default: '4000' },
    smoke: { type: 'boolean', default: false },
  },
});
const STREAMS = (args.streams ?? (args.smoke ? '200' : '1000,5000')).split(',').map(Number);
const STALLED = Number(args.stalled ?? (args.smoke ? 100 : 1000));
const MODEL = 'sim-model';
const NS = 'default';
/** Engines per pool: the default per-endpoint limit (1024) times this covers 5,000 streams with room. */
const ENGINES = 6;

const rssMb = (pid: number): number => procStats(pid).rssMb;

/** Two ModelServers (paced and fast engines) with a route each, written straight into KV. */
async function seed(bus: Bus, pools: Record<'paced' | 'fast', SimEngineHandle[]>): Promise<void> {
  const servers = await bus.kv(Buckets.modelServers, ModelServerRecordSchema);
  const routes = await bus.kv(Buckets.modelRoutes, ModelRouteRecordSchema);
  const endpoints = await bus.kv(Buckets.endpoints, EndpointRecordSchema);
  for (const [name, sims] of Object.entries(pools)) {
    await servers.put(objectKey(NS, name), {
      schemaVersion: 1,
      namespace: NS,
      name,
      mode: 'aggregated',
      spec: {
        model: MODEL,
        inferenceEngine: 'vLLM',
        workloadSelector: { matchLabels: { app: name } },
        workloadPort: { port: sims[0]?.port, protocol: 'http' },
      },
    });
    await routes.put(objectKey(NS, name), {
      schemaVersion: 1,
      namespace: NS,
      name,
      spec: { modelName: name, rules: [{ targetModels: [{ modelServerName: name, weight: 100 }] }] },
    });
    for (const [i, sim] of sims.entries()) {
      await endpoints.put(endpointKey(NS, name, `${name}-${i}`), {
        schemaVersion: 1,
        namespace: NS,
        modelServer: name,
        pod: `${name}-${i}`,
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
  }
}

/** The gateway under measurement (in-process scheduling) and its pid, for /proc. */
async function startGateway(natsUrl: string): Promise<BenchGateway & { readonly pid: number }> {
  const gw = await startBenchGateway(natsUrl, { args: ['--scheduling', 'in-process'] });
  return { ...gw, pid: gw.child.process.pid as number };
}

const agent = new Agent({ keepAlive: false, maxSockets: Infinity });

/** One streaming chat request; `stall`: stop reading once the headers are in. Resolves with the response. */
function openStream(port: number, model: string, tokens: number, onFirstByte: () => void, stall: boolean): Promise<IncomingMessage> {
  const body = JSON.stringify({ model, stream: true, max_tokens: tokens, messages: [{ role: 'user', content: 'hi' }] });
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path: '/v1/chat/completions',
        method: 'POST',
        agent,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        if (stall) {
          res.pause();
          onFirstByte();
          resolve(res);
          return;
        }
        res.once('data', onFirstByte);
        res.on('data', () => undefined);
        res.on('end', () => resolve(res));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** Highest RSS of `pid` sampled every 100 ms until `until` resolves. */
async function peakRss(pid: number, until: Promise<unknown>): Promise<number> {
  let peak = rssMb(pid);
  let done = false;
  void until.finally(() => {
    done = true;
  });
  while (!done) {
    peak = Math.max(peak, rssMb(pid));
    await new Promise((r) => setTimeout(r, 100));
  }
  return peak;
}

/** A few streams through every code path, then the idle RSS: the median of samples over two seconds. */
async function warmIdleRss(port: number, pid: number, model: string): Promise<number> {
  for (let i = 0; i < 50; i++)
    await new Promise<void>(
      (resolve) =>
        void openStream(port, model, 2, () => undefined, false).then(
          () => resolve(),
          () => resolve(),
        ),
    );
  const samples: number[] = [];
  for (let i = 0; i < 20; i++) {
    await new Promise((r) => setTimeout(r, 100));
    samples.push(rssMb(pid));
  }
  return samples.sort((a, b) => a - b)[10];
}

type Row = (string | number)[];

async function reading(natsUrl: string, n: number): Promise<Row> {
  const gw = await startGateway(natsUrl);
  try {
    await waitFor(async () => (await openStream(gw.port, 'paced', 1, () => undefined, false).catch(() => undefined))?.statusCode === 200, {
      what: 'gateway serving',
      timeoutMs: 30_000,
    });
    const idle = await warmIdleRss(gw.port, gw.pid, 'paced');
    let open = 0;
    const all = Promise.all(Array.from({ length: n }, () => openStream(gw.port, 'paced', Number(args.tokens), () => open++, false)));
    await waitFor(() => open >= n, { what: `${n} streams open`, timeoutMs: 120_000, intervalMs: 50 });
    const peak = await peakRss(gw.pid, all);
    const statuses = await all;
    const ok = statuses.filter((r) => r.statusCode === 200).length;
    return [`${n} streams, clients reading`, n, idle, peak, peak - idle, ((peak - idle) / n) * 1000, `${ok}/${n}`];
  } finally {
    await gw.child.stop();
  }
}

async function stalled(natsUrl: string, n: number): Promise<Row[]> {
  const gw = await startGateway(natsUrl);
  try {
    await waitFor(async () => (await openStream(gw.port, 'fast', 1, () => undefined, false).catch(() => undefined))?.statusCode === 200, {
      what: 'gateway serving',
      timeoutMs: 30_000,
    });
    const idle = await warmIdleRss(gw.port, gw.pid, 'fast');
    let open = 0;
    const responses = await Promise.all(
      Array.from({ length: n }, () => openStream(gw.port, 'fast', Number(args['stalled-tokens']), () => open++, true)),
    );
    // Unpaced engines generate the whole answer in a second or two: RSS that stays flat from 3 s to 10 s is bounded.
    const early = await peakRss(gw.pid, new Promise((r) => setTimeout(r, 3000)));
    const late = await peakRss(gw.pid, new Promise((r) => setTimeout(r, 7000)));
    const peak = Math.max(early, late);
    for (const r of responses) r.destroy();
    return [
      [
        `${n} streams, clients stopped reading (peak by 3 s / 3–10 s)`,
        n,
        idle,
        `${early.toFixed(0)} / ${late.toFixed(0)}`,
        peak - idle,
        ((peak - idle) / n) * 1000,
        `${open}/${n} open, never read`,
      ],
    ];
  } finally {
    await gw.child.stop();
  }
}

async function main(): Promise<void> {
  const nats = await startNatsServer();
  const paced = { decodeMsPerToken: Number(args['ms-per-token']) };
  const sims: Record<'paced' | 'fast', SimEngineHandle[]> = { paced: [], fast: [] };
  for (let i = 0; i < ENGINES; i++) {
    sims.paced.push(
      await startSimEngine({
        engine: 'vllm',
        role: 'both',
        host: `127.0.45.${i + 1}`,
        model: MODEL,
        latencyProfile: 'zero',
        latency: paced,
      }),
    );
  }
  for (let i = 0; i < 2; i++) {
    sims.fast.push(await startSimEngine({ engine: 'vllm', role: 'both', host: `127.0.46.${i + 1}`, model: MODEL, latencyProfile: 'zero' }));
  }
  const bus = await connectBus({ servers: nats.url, name: 'bench' });
  try {
    await seed(bus, sims);
    const rows: Row[] = [];
    for (const n of STREAMS) rows.push(await reading(nats.url, n));
    rows.push(...(await stalled(nats.url, STALLED)));
    process.stdout.write(
      `\n### Gateway RSS per concurrent SSE stream (${args.tokens} tokens at ${args['ms-per-token']} ms per token; stalled clients: ` +
        `${args['stalled-tokens']} tokens from unpaced engines)\n\n`,
    );
    process.stdout.write(
      `${markdownTable(
        ['scenario', 'streams', 'idle RSS MB (baseline)', 'peak RSS MB', 'above idle MB', 'MB per 1,000 streams', 'completed'],
        rows,
      )}\n`,
    );
  } finally {
    await bus.close();
    await Promise.all([...sims.paced, ...sims.fast].map((s) => s.close()));
    await nats.close();
  }
}

void main().catch((err: unknown) => {
  process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
