/**
 * KV stranded by aborted PD requests, with and without the gateway's KV-ownership-aware aborts, per engine.
 *
 *   npx tsx tools/bench/src/kv-aborts.ts [--requests 20]
 *
 * A real gateway (child process) in front of engine-sims that model where each engine keeps KV for a peer
 * (docs/kv-ownership.md): a vLLM prefill keeps a remote-decode request's blocks until a decode reads them or
 * VLLM_NIXL_ABORT_REQUEST_TIMEOUT (480 s) passes; an SGLang decode pre-allocates a request's blocks and waits for
 * the prefill's transfer up to SGLANG_DISAGGREGATION_WAITING_TIMEOUT (300 s). Each scenario sends N requests that
 * go wrong after the KV was set aside, then reads the engines' `triad_sim_kv_held_blocks` once the gateway is done.
 * Baselines in the same run: vLLM with TRIAD_KV_RELEASE=false; SGLang with nobody aborting the decode (the engines on
 * their own). Decisions are fixed (a stand-in scheduler on NATS): every vLLM request tries (P, D1) then (P, D2).
 */
import type { DecisionOrError, EndpointRef, SchedulingRequest } from '@triad/bus';
import { connectBus, type Bus } from '@triad/bus/client';
import { startSimEngine, type SimEngineHandle, type SimEngineOptions } from '@triad/engine-sim';
import { startNatsServer, waitFor, parseToolArgs } from '@triad/testing';
import { startBenchGateway, type BenchGateway as Gateway } from './lib/bench-gateway';
import { MODEL, metricTotal as metric, publishPdServer, serveFixedDecisions } from './lib/fixed-decisions';
import { markdownTable } from './lib/table';

const { values: args } = parseToolArgs({ options: { requests: { type: 'string', default: '20' } } });
const N = Number(args.requests);
const VLLM_ABORT_TIMEOUT_MS = 480_000;
const SGLANG_WAITING_TIMEOUT_MS = 300_000;
// A 120-word prompt: 14 blocks of 16 tokens per request in the sims.
const PROMPT = Array.from({ length: 120 }, (_, i) => `word${i}`).join(' ');

/** The world one scenario runs in: its own sims, ModelServer, route and fixed decisions. */
class Scenario {
  readonly sims: SimEngineHandle[] = [];
  constructor(
    readonly bus: Bus,
    readonly name: string,
    readonly decisions: Map<string, (r: SchedulingRequest) => DecisionOrError>,
  ) {}

  async sim(role: SimEngineOptions['role'], engine: 'vllm' | 'sglang', extra: Partial<SimEngineOptions> = {}): Promise<SimEngineHandle> {
    const sim = await startSimEngine({ engine, role, model: MODEL, admin: true, latencyProfile: 'zero', ...extra });
    this.sims.push(sim);
    return sim;
  }

  publish(engine: 'vLLM' | 'SGLang', pods: Record<string, [SimEngineHandle, 'prefill' | 'decode']>): Promise<Record<string, EndpointRef>> {
    const published = Object.fromEntries(
      Object.entries(pods).map(([pod, [sim, role]]) => [
        pod,
        { sim, role, extra: sim.bootstrapPort !== undefined ? { bootstrapPort: sim.bootstrapPort } : {} },
      ]),
    );
    return publishPdServer(this.bus, this.name, engine, engine === 'vLLM' ? { type: 'nixl' } : undefined, published);
  }

  async close(): Promise<void> {
    await Promise.all(this.sims.map((s) => s.close()));
  }
}

const chat = (url: string, model: string, stream: boolean, signal?: AbortSignal) =>
  fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    ...(signal ? { signal } : {}),
    body: JSON.stringify({ model, messages: [{ role: 'user', content: PROMPT }], max_tokens: 8, stream }),
  }).then(
    async (r) => (await r.arrayBuffer(), r.status),
    () => 0,
  );

const inference = (sim: SimEngineHandle) => sim.requests().filter((r) => r.path.startsWith('/v1/')).length;

type Row = (string | number)[];

/** vLLM NIXL: P, D1, D2; `fault` makes D1 fail or stall, `abandon` has the client leave once D1 got the decode leg. */
async function vllmScenario(s: Scenario, gw: Gateway, fault: 'error500' | 'slow-first-byte'): Promise<{ held: number; released: number }> {
  const p = await s.sim('prefill', 'vllm', { kvLeaseMs: VLLM_ABORT_TIMEOUT_MS });
  const d1 = await s.sim('decode', 'vllm');
  const d2 = await s.sim('decode', 'vllm');
  const refs = await s.publish('vLLM', { p: [p, 'prefill'], d1: [d1, 'decode'], d2: [d2, 'decode'] });
  s.decisions.set(s.name, (r) => ({
    id: r.id,
    ok: true,
    mode: 'pd',
    encoders: [],
    attempts: [
      { prefill: refs['p'], endpoint: refs['d1'] },
      { prefill: refs['p'], endpoint: refs['d2'] },
    ],
  }));
  await waitFor(async () => (await chat(gw.url, s.name, false)) === 200, { what: `${s.name} served`, timeoutMs: 30_000 });
  await waitFor(() => p.kvHeld().requests === 0, { what: 'warm-up hand-off taken' });
  const STRANDED = 'triad_gateway_kv_stranded_total{engine="vLLM",';
  const RELEASE_ASKED = 'action="release"}';
  const asked = async () => {
    const text = await (await fetch(`http://127.0.0.1:${gw.opsPort}/metrics`)).text();
    return text
      .split('\n')
      .filter((l) => l.startsWith(STRANDED) && l.includes(RELEASE_ASKED))
      .reduce((n, l) => n + Number(l.split(' ').pop()), 0);
  };
  const before = {
    stranded: await metric(gw.opsPort, STRANDED),
    asked: await asked(),
    ok: await metric(gw.opsPort, 'triad_gateway_kv_releases_total{engine="vLLM",outcome="ok"}'),
    settled: await metric(gw.opsPort, 'triad_gateway_kv_releases_total{engine="vLLM"'),
  };
  d1.setFault(fault === 'error500' ? { mode: 'error500', count: N } : { mode: 'slow-first-byte', delayMs: 600_000, count: N });
  for (let i = 0; i < N; i++) {
    if (fault === 'error500') {
      await chat(gw.url, s.name, false);
      continue;
    }
    const seen = inference(d1);
    const client = new AbortController();
    const sent = chat(gw.url, s.name, true, client.signal);
    await waitFor(() => inference(d1) > seen, { what: 'the decode leg at D1' });
    client.abort();
    await sent;
  }
  // Settled: every stranded hand-off counted, every release leg answered; the prefill then holds what is left.
  await waitFor(async () => (await metric(gw.opsPort, STRANDED)) - before.stranded >= N, { what: 'strands counted' });
  const releases = (await asked()) - before.asked;
  await waitFor(async () => (await metric(gw.opsPort, 'triad_gateway_kv_releases_total{engine="vLLM"')) - before.settled >= releases, {
    what: 'release legs settled',
  });
  const released = (await metric(gw.opsPort, 'triad_gateway_kv_releases_total{engine="vLLM",outcome="ok"}')) - before.ok;
  return { held: p.kvHeld().blocks, released };
}

/** SGLang: P (stuck or failing) and D; the decode's pre-allocated blocks after the gateway is done. */
async function sglangScenario(s: Scenario, gw: Gateway | undefined, fault: 'hang' | 'error500'): Promise<number> {
  const p = await s.sim('prefill', 'sglang', { bootstrapPort: 0 });
  const d = await s.sim('decode', 'sglang', { bootstrapTimeoutMs: SGLANG_WAITING_TIMEOUT_MS });
  const refs = await s.publish('SGLang', { p: [p, 'prefill'], d: [d, 'decode'] });
  s.decisions.set(s.name, (r) => ({
    id: r.id,
    ok: true,
    mode: 'pd',
    encoders: [],
    attempts: [{ prefill: refs['p'], endpoint: refs['d'] }],
  }));
  const clients = Array.from({ length: N }, () => new AbortController());
  if (gw === undefined) {
    // The engines on their own: the decode leg of each pair, sent as a router would, and left to the engine.
    const sent = clients.map((c, i) =>
      fetch(`${d.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        signal: c.signal,
        body: JSON.stringify({
          model: MODEL,
          messages: [{ role: 'user', content: PROMPT }],
          max_tokens: 8,
          bootstrap_host: p.host,
          bootstrap_port: p.bootstrapPort,
          bootstrap_room: 5000 + i,
        }),
      }).catch(() => undefined),
    );
    await waitFor(() => d.kvHeld().requests === N, { what: 'the decode to pre-allocate' });
    const held = d.kvHeld().blocks;
    for (const c of clients) c.abort();
    await Promise.all(sent);
    return held;
  }
  await waitFor(async () => (await chat(gw.url, s.name, true)) === 200, { what: `${s.name} served`, timeoutMs: 30_000 });
  const STRANDED = 'triad_gateway_kv_stranded_total{engine="SGLang"';
  const before = await metric(gw.opsPort, STRANDED);
  p.setFault({ mode: fault, count: N });
  if (fault === 'hang') {
    const sent = clients.map((c) => chat(gw.url, s.name, true, c.signal));
    await waitFor(() => d.kvHeld().requests === N, { what: 'the decode to pre-allocate' });
    for (const c of clients) c.abort();
    await Promise.all(sent);
  } else {
    for (let i = 0; i < N; i++) await chat(gw.url, s.name, true);
  }
  await waitFor(async () => (await metric(gw.opsPort, STRANDED)) - before >= N, { what: 'strands counted' });
  await waitFor(() => d.kvHeld().requests === 0, { what: 'the decode to settle', timeoutMs: 5_000 }).catch(() => undefined);
  return d.kvHeld().blocks;
}

async function main(): Promise<void> {
  const nats = await startNatsServer();
  const bus = await connectBus({ servers: nats.url, name: 'bench-kv-aborts' });
  const decisions = new Map<string, (r: SchedulingRequest) => DecisionOrError>();
  serveFixedDecisions(bus, (r) => decisions.get(r.modelServer)?.(r));
  const kvRelease = (on: boolean) => ({ env: { TRIAD_KV_RELEASE: String(on), TRIAD_SCHEDULE_BUDGET_MS: '2000' } });
  const on = await startBenchGateway(nats.url, kvRelease(true));
  const off = await startBenchGateway(nats.url, kvRelease(false));
  const rows: Row[] = [];
  let n = 0;
  const scenario = async <T>(fn: (s: Scenario) => Promise<T>): Promise<T> => {
    const s = new Scenario(bus, `s${n++}`, decisions);
    try {
      return await fn(s);
    } finally {
      await s.close();
    }
  };
  try {
    for (const [fault, what] of [
      ['error500', 'decode answers 500 (retried on D2)'],
      ['slow-first-byte', 'client leaves after the prefill answered'],
    ] as const) {
      const triad = await scenario((s) => vllmScenario(s, on, fault));
      const base = await scenario((s) => vllmScenario(s, off, fault));
      rows.push([
        'vLLM NIXL PD',
        what,
        String(N),
        String(triad.held),
        `${triad.released} release legs answered`,
        String(base.held),
        'VLLM_NIXL_ABORT_REQUEST_TIMEOUT (480 s)',
      ]);
    }
    for (const [fault, what] of [
      ['hang', 'client leaves while the prefill is stuck'],
      ['error500', 'prefill answers 500'],
    ] as const) {
      const triad = await scenario((s) => sglangScenario(s, on, fault));
      const base = await scenario((s) => sglangScenario(s, undefined, fault));
      rows.push([
        'SGLang PD',
        what,
        String(N),
        String(triad),
        'decode leg aborted',
        String(base),
        'SGLANG_DISAGGREGATION_WAITING_TIMEOUT (300 s)',
      ]);
    }
    process.stdout.write(`\n### KV blocks left held after ${N} failed or abandoned PD requests (16-token blocks, 14 per request)\n\n`);
    process.stdout.write(
      `${markdownTable(
        [
          'engine',
          'what went wrong',
          'requests',
          'blocks held, Triad',
          "Triad's action",
          'blocks held, baseline',
          'baseline frees them at',
        ],
        rows,
      )}\n`,
    );
    process.stdout.write(
      '\nBaseline: vLLM with TRIAD_KV_RELEASE=false; SGLang with nobody aborting the decode (the engines on their own).\n',
    );
  } finally {
    await on.child.stop();
    await off.child.stop();
    await bus.close();
    await nats.close();
  }
}

void main().catch((err: unknown) => {
  process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
