/**
 * The concurrent vLLM P→D flows against the sequential one, on the same engine-sims in the same run.
 *
 *   npx tsx tools/bench/src/vllm-kv-flows.ts [--requests 40] [--push-requests 40]
 *
 * A real gateway (child process) with a stand-in scheduler on NATS that always picks the same pair, in front of
 * engine-sims that run the engines' own KV connectors (docs/engine-sim.md, *vLLM KV connectors*).
 *
 * Requests go one at a time (1 connection), the paths taking turns request by request.
 *
 * 1. Upstream vLLM's MooncakeConnector, zero-latency sims, ~1,000-token
 *    prompts, streamed: the same P/D pair behind two ModelServers, one pinned to the sequential flow
 *    (`kvConnector.implementation: vllm-ascend`, what Triad did for every Mooncake ModelServer before) and one with
 *    the pod-watcher's probe result (concurrent). Per flow: decode-side recomputed prefills (the decode's
 *    `localPrefillFallbacks`), KV pulled per request (`kvPullsReceived` / requests), client latency to the last byte
 *    (p50/p99). Baseline: the decode sim asked directly, prefilling itself (no gateway, no prefill leg).
 * 2. vLLM's NixlPushConnector with the realistic profile (50 ms per 1k prompt tokens, 20 ms per decode step):
 *    the same push P/D pair dispatched sequentially (`kvConnector: nixl`: the prefill's params relayed, as vLLM's
 *    push toy proxy and vllm-router do) and concurrently (`transferMode: push`). Time to first token at the client
 *    (p50/p99). Baseline: the decode sim asked directly (it prefills itself).
 */
import { performance } from 'node:perf_hooks';
import type { DecisionOrError, EndpointRecord, EndpointRef, SchedulingRequest } from '@triad/bus';
import { connectBus, type Bus } from '@triad/bus/client';
import type { KvConnector } from '@triad/crd';
import { startSimEngine, type SimEngineHandle, type SimEngineOptions } from '@triad/engine-sim';
import { startNatsServer, waitFor, parseToolArgs } from '@triad/testing';
import { startBenchGateway } from './lib/bench-gateway';
import { MODEL, publishPdServer, serveFixedDecisions } from './lib/fixed-decisions';
import { markdownTable } from './lib/table';

const { values: args } = parseToolArgs({
  options: { requests: { type: 'string', default: '40' }, 'push-requests': { type: 'string', default: '40' } },
});
const N = Number(args.requests);
const N_PUSH = Number(args['push-requests']);
// About 1,000 simulated tokens: long enough that the prefill leg is the point of PD. Each request's prompt starts
// differently, so no prefix cache spares the engines the prefill being measured.
const BODY = 'The quarterly numbers moved in every region and every product line. '.repeat(60);
let sent = 0;
const prompt = () => `Request ${++sent}: summarise this report. ${BODY}`;
const decoder = new TextDecoder();

function percentile(xs: readonly number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
}

interface Timing {
  readonly ttftMs: number;
  readonly totalMs: number;
}

/** One streamed chat request; the first content byte and the end, client side. */
async function streamed(url: string, model: string): Promise<Timing> {
  const t0 = performance.now();
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: prompt() }], max_tokens: 8, stream: true }),
  });
  if (res.status !== 200 || res.body === null) throw new Error(`${model}: HTTP ${res.status}: ${await res.text()}`);
  let ttft = -1;
  const reader = res.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (ttft < 0 && decoder.decode(value).includes('"content":"')) ttft = performance.now() - t0;
  }
  return { ttftMs: ttft, totalMs: performance.now() - t0 };
}

class World {
  readonly sims: SimEngineHandle[] = [];
  readonly decisions = new Map<string, EndpointRef[]>();

  constructor(readonly bus: Bus) {}

  async sim(opts: Omit<SimEngineOptions, 'engine' | 'model'>): Promise<SimEngineHandle> {
    const s = await startSimEngine({ engine: 'vllm', model: MODEL, admin: true, requestLogLimit: 0, ...opts });
    this.sims.push(s);
    return s;
  }

  /** A PD ModelServer named `name` over the pair, with the records the pod-watcher would write. */
  async server(name: string, kvConnector: KvConnector, p: SimEngineHandle, d: SimEngineHandle, prefillExtra: Partial<EndpointRecord> = {}) {
    const refs = await publishPdServer(this.bus, name, 'vLLM', kvConnector, {
      p: { sim: p, role: 'prefill', extra: prefillExtra },
      d: { sim: d, role: 'decode' },
    });
    this.decisions.set(name, [refs['p'], refs['d']]);
  }

  decide(r: SchedulingRequest): DecisionOrError | undefined {
    const refs = this.decisions.get(r.modelServer);
    if (refs === undefined) return undefined;
    return {
      id: r.id,
      ok: true,
      mode: 'pd',
      encoders: [],
      attempts: [{ prefill: refs[0], endpoint: refs[1] }],
    };
  }

  async close(): Promise<void> {
    await Promise.all(this.sims.map((s) => s.close()));
  }
}

async function engineIds(sim: SimEngineHandle): Promise<string[]> {
  const query = (await (await fetch(`http://${sim.host}:${sim.bootstrapPort}/query`)).json()) as Record<string, { engine_id: string }>;
  return Object.keys(query)
    .sort()
    .map((k) => query[k].engine_id);
}

interface Measured {
  recomputed: number;
  pulled: number;
  readonly ttft: number[];
  readonly total: number[];
}

/**
 * Runs `n` rounds, one request of each path per round, one at a time (after a warm-up round), so a noisy machine
 * slows every path alike; counts what the decode did for each request.
 */
async function measure(n: number, d: SimEngineHandle, paths: readonly (() => Promise<Timing>)[]): Promise<Measured[]> {
  for (const send of paths) await send();
  const out: Measured[] = paths.map(() => ({ recomputed: 0, pulled: 0, ttft: [], total: [] }));
  for (let i = 0; i < n; i++) {
    for (const [k, send] of paths.entries()) {
      const before = d.counters();
      const t = await send();
      const after = d.counters();
      const m = out[k];
      m.recomputed += (after['localPrefillFallbacks'] ?? 0) - (before['localPrefillFallbacks'] ?? 0);
      m.pulled += (after['kvPullsReceived'] ?? 0) - (before['kvPullsReceived'] ?? 0);
      m.ttft.push(t.ttftMs);
      m.total.push(t.totalMs);
    }
  }
  return out;
}

const fmt = (ms: number) => ms.toFixed(2);

async function main(): Promise<void> {
  const nats = await startNatsServer();
  const bus = await connectBus({ servers: nats.url, name: 'bench-vllm-kv-flows' });
  const world = new World(bus);
  serveFixedDecisions(bus, (r) => world.decide(r));
  const gw = await startBenchGateway(nats.url, { env: { TRIAD_LOG_LEVEL: 'error', TRIAD_SCHEDULE_BUDGET_MS: '2000' } });
  try {
    // 1. Upstream vLLM Mooncake, zero-latency sims.
    const mp = await world.sim({ role: 'prefill', host: '127.0.5.1', kvConnector: 'mooncake', kvLeaseMs: 30_000 });
    const md = await world.sim({ role: 'decode', host: '127.0.5.2', kvConnector: 'mooncake' });
    const bootstrap = { bootstrapPort: mp.bootstrapPort as number };
    await world.server('mc-sequential', { type: 'mooncake', implementation: 'vllm-ascend' }, mp, md, {
      ...bootstrap,
      mooncake: { flow: 'sequential', source: 'override' },
    });
    await world.server('mc-concurrent', { type: 'mooncake' }, mp, md, {
      ...bootstrap,
      mooncake: { flow: 'concurrent', engineIds: await engineIds(mp), source: 'probe' },
    });
    for (const m of ['mc-sequential', 'mc-concurrent']) {
      await waitFor(async () => (await streamed(gw.url, m).catch(() => undefined)) !== undefined, {
        what: `${m} served`,
        timeoutMs: 30_000,
      });
    }
    const [direct, sequential, concurrent] = (await measure(N, md, [
      () => streamed(md.url, MODEL),
      () => streamed(gw.url, 'mc-sequential'),
      () => streamed(gw.url, 'mc-concurrent'),
    ])) as [Measured, Measured, Measured];
    const mooncakeRows = [
      ['decode sim alone (baseline: it prefills itself)', direct],
      ['Triad, sequential flow (before)', sequential],
      ['Triad, concurrent flow (after)', concurrent],
    ] as const;
    console.log(`\nUpstream vLLM MooncakeConnector, zero-latency sims, 1 connection, ${N} streamed requests of ~1,000 tokens each\n`);
    console.log(
      markdownTable(
        ['path', 'decode-side recomputed prefills', 'KV pulled per request', 'latency p50 (ms)', 'latency p99 (ms)'],
        mooncakeRows.map(([what, r]) => [
          what,
          `${r.recomputed} / ${N}`,
          fmt(r.pulled / N),
          fmt(percentile(r.total, 50)),
          fmt(percentile(r.total, 99)),
        ]),
      ),
    );
    const added = percentile(concurrent.total, 50) - percentile(sequential.total, 50);
    console.log(`\nconcurrent − sequential at p50: ${added >= 0 ? '+' : ''}${fmt(added)} ms`);

    // 2. NIXL push, realistic profile.
    const pp = await world.sim({ role: 'prefill', host: '127.0.5.3', kvConnector: 'nixl-push', latencyProfile: 'realistic' });
    const pd = await world.sim({ role: 'decode', host: '127.0.5.4', kvConnector: 'nixl-push', latencyProfile: 'realistic' });
    await world.server('push-sequential', { type: 'nixl' }, pp, pd);
    await world.server('push-concurrent', { type: 'nixl', transferMode: 'push' }, pp, pd);
    for (const m of ['push-sequential', 'push-concurrent']) {
      await waitFor(async () => (await streamed(gw.url, m).catch(() => undefined)) !== undefined, {
        what: `${m} served`,
        timeoutMs: 30_000,
      });
    }
    const [pushDirect, pushSequential, pushConcurrent] = (await measure(N_PUSH, pd, [
      () => streamed(pd.url, MODEL),
      () => streamed(gw.url, 'push-sequential'),
      () => streamed(gw.url, 'push-concurrent'),
    ])) as [Measured, Measured, Measured];
    console.log(`\nvLLM NixlPushConnector, realistic sims, 1 connection, ${N_PUSH} streamed requests of ~1,000 tokens each\n`);
    console.log(
      markdownTable(
        ['dispatch', 'TTFT p50 (ms)', 'TTFT p99 (ms)', 'decode-side recomputed prefills', 'KV pushed per request'],
        [
          ['decode sim alone (baseline: it prefills itself)', pushDirect],
          ['Triad, sequential (prefill, then decode)', pushSequential],
          ['Triad, concurrent (transferMode: push)', pushConcurrent],
        ].map(([what, r]) => {
          const m = r as Measured;
          return [
            what as string,
            fmt(percentile(m.ttft, 50)),
            fmt(percentile(m.ttft, 99)),
            `${m.recomputed} / ${N_PUSH}`,
            fmt(m.pulled / N_PUSH),
          ];
        }),
      ),
    );
  } finally {
    await world.close();
    await gw.child.stop();
    await bus.close();
    await nats.close();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
