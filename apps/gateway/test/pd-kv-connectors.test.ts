import OpenAI from 'openai';
import type { EndpointRef } from '@triad/bus';
import type { SimEngineHandle, SimEngineOptions } from '@triad/engine-sim';
import type { KvConnector } from '@triad/crd';
import { inferenceRequests, startHarness, type Harness } from './support/harness';

const MODEL = 'Qwen/Qwen2.5-7B';
// Long enough to need a prefill leg (about 1,000 simulated tokens): the decode must not compute it again.
const LONG = `Summarise this report. ${'The quarterly numbers moved in every region and every product line. '.repeat(60)}`;

type Body = Record<string, unknown>;
type Kv = Record<string, unknown>;

async function gatewayMetric(h: Harness, series: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${h.gateway.metricsPort}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? 0 : Number(line.slice(series.length + 1));
}

async function engineIdsOf(sim: SimEngineHandle): Promise<string[]> {
  const query = (await (await fetch(`http://${sim.host}:${sim.bootstrapPort}/query`)).json()) as Record<string, { engine_id: string }>;
  return Object.keys(query)
    .sort()
    .map((k) => query[k].engine_id);
}

const pdSelector = (app: string) => ({
  matchLabels: { app },
  pdGroup: { groupKey: 'g', prefillLabels: { r: 'p' }, decodeLabels: { r: 'd' } },
});

/** The last inference request a sim received, with its parsed body. */
function last(sim: SimEngineHandle) {
  const r = inferenceRequests(sim).at(-1);
  if (r === undefined) throw new Error(`no request reached ${sim.url}`);
  return { ...r, json: r.body as Body, kv: (r.body as Body)['kv_transfer_params'] as Kv | undefined };
}

describe('gateway, vLLM PD KV connectors against engine-sims that follow the engines', () => {
  let h: Harness;
  const sims = new Map<string, SimEngineHandle>();
  const refs = new Map<string, EndpointRef>();
  let octet = 1;

  async function sim(name: string, opts: Omit<SimEngineOptions, 'engine' | 'model'>): Promise<SimEngineHandle> {
    const s = await h.startSim({ engine: 'vllm', model: MODEL, host: `127.0.4.${octet++}`, ...opts });
    sims.set(name, s);
    return s;
  }
  const at = (name: string) => sims.get(name) as SimEngineHandle;

  /** A PD ModelServer and route named `server`, with an endpoint record per pod (role from its name). */
  async function server(name: string, kvConnector: KvConnector, pods: Record<string, Partial<EndpointRef>>): Promise<void> {
    await h.putServer(name, {
      model: MODEL,
      inferenceEngine: 'vLLM',
      workloadPort: { port: 8000, protocol: 'http' },
      workloadSelector: pdSelector(name),
      kvConnector,
    });
    await h.putRoute(name, { modelName: name, rules: [{ targetModels: [{ modelServerName: name, weight: 100 }] }] });
    for (const [pod, extra] of Object.entries(pods)) {
      const s = at(pod);
      const role = s.role === 'prefill' ? 'prefill' : 'decode';
      await h.putEndpoint(name, pod, role, s, {
        group: 'g1',
        ...(extra.mooncake ? { mooncake: { ...extra.mooncake, source: 'probe' } } : {}),
      });
      refs.set(`${name}/${pod}`, { key: `default.${name}.${pod}`, pod, ip: s.host, port: s.port, ...extra });
    }
    await h.waitForModel(name);
  }
  const pair = (server: string, p: string, d: string) => ({ endpoint: refs.get(`${server}/${d}`)!, prefill: refs.get(`${server}/${p}`)! });
  const decisions = new Map<string, ReturnType<typeof pair>[]>();

  beforeAll(async () => {
    h = await startHarness();
    const mooncake = { kvConnector: 'mooncake', kvLeaseMs: 3000 } as const;
    await sim('mp', { ...mooncake, role: 'prefill', dataParallel: 2 });
    await sim('md', { ...mooncake, role: 'decode' });
    await sim('mp2', { ...mooncake, role: 'prefill' });
    await sim('md2', { ...mooncake, role: 'decode' });
    await sim('ap', { role: 'prefill', kvConnector: 'mooncake-ascend' });
    await sim('ad', { role: 'decode', kvConnector: 'mooncake-ascend' });
    await sim('pp', { role: 'prefill', kvConnector: 'nixl-push', kvLeaseMs: 3000 });
    await sim('pd', { role: 'decode', kvConnector: 'nixl-push' });
    await sim('lp', { role: 'prefill', kvConnector: 'lmcache', lmcacheStore: 'gateway-pd-kv' });
    await sim('ld', { role: 'decode', kvConnector: 'lmcache', lmcacheStore: 'gateway-pd-kv' });
    const probed = async (name: string) => ({
      mooncake: { flow: 'concurrent' as const, engineIds: await engineIdsOf(at(name)) },
      bootstrapPort: at(name).bootstrapPort,
    });
    // Upstream vLLM's connector, as the pod-watcher's probe found it.
    await server('mc', { type: 'mooncake' }, { mp: await probed('mp'), md: {}, mp2: await probed('mp2'), md2: {} });
    // The same engines before any probe result (or behind a watcher without one): Kthena's sequential flow.
    await server('mc-unprobed', { type: 'mooncake' }, { mp: { bootstrapPort: at('mp').bootstrapPort }, md: {} });
    // The ModelServer says upstream vLLM although the record says sequential: the override wins.
    await server(
      'mc-pinned',
      { type: 'mooncake', implementation: 'vllm' },
      {
        mp: { bootstrapPort: at('mp').bootstrapPort, mooncake: { flow: 'sequential', engineIds: await engineIdsOf(at('mp')) } },
        md: {},
      },
    );
    await server('mc-ascend', { type: 'mooncake' }, { ap: { mooncake: { flow: 'sequential' } }, ad: {} });
    await server('push', { type: 'nixl', transferMode: 'push' }, { pp: {}, pd: {} });
    await server('lmc', { type: 'lmcache' }, { lp: {}, ld: {} });
    decisions.set('mc', [pair('mc', 'mp', 'md')]);
    decisions.set('mc-failover', [pair('mc', 'mp2', 'md2'), pair('mc', 'mp', 'md')]);
    decisions.set('mc-unprobed', [pair('mc-unprobed', 'mp', 'md')]);
    decisions.set('mc-pinned', [pair('mc-pinned', 'mp', 'md')]);
    decisions.set('mc-ascend', [pair('mc-ascend', 'ap', 'ad')]);
    decisions.set('push', [pair('push', 'pp', 'pd')]);
    decisions.set('lmc', [pair('lmc', 'lp', 'ld')]);
    let failover = false;
    h.decide = (r) => {
      const attempts = decisions.get(failover && r.modelServer === 'mc' ? 'mc-failover' : r.modelServer);
      if (attempts === undefined) return { id: r.id, ok: false, code: 'SCHED_NO_CANDIDATES', message: 'unknown server' };
      return { id: r.id, ok: true, mode: 'pd', encoders: [], attempts };
    };
    setFailover = (on) => (failover = on);
  });
  let setFailover: (on: boolean) => void = () => undefined;
  afterAll(async () => {
    await h?.close();
  });

  const client = () => new OpenAI({ baseURL: `${h.gateway.url}/v1`, apiKey: 'x', maxRetries: 0 });
  async function streamed(model: string): Promise<string> {
    const stream = await client().chat.completions.create({
      model,
      messages: [{ role: 'user', content: LONG }],
      max_tokens: 5,
      stream: true,
    });
    let text = '';
    for await (const c of stream) text += c.choices[0]?.delta.content ?? '';
    return text;
  }

  it("upstream vLLM Mooncake: P and D at once, a router-made transfer_id, the engine id of P's DP rank — the decode loads the KV", async () => {
    const before = { received: at('md').counters()['kvPullsReceived'], served: at('mp').counters()['kvPullsServed'] };
    expect((await streamed('mc')).length).toBeGreaterThan(0);
    const p = last(at('mp'));
    const d = last(at('md'));
    const rank = Number(p.headers['x-data-parallel-rank']);
    expect([0, 1]).toContain(rank);
    expect(p.json).toMatchObject({ stream: false, max_tokens: 1 });
    expect(p.kv).toEqual({ do_remote_decode: true, do_remote_prefill: false, transfer_id: expect.stringMatching(/^xfer-/) });
    expect(d.kv).toEqual({
      do_remote_decode: false,
      do_remote_prefill: true,
      remote_bootstrap_addr: `http://${at('mp').host}:${at('mp').bootstrapPort}`,
      remote_engine_id: (await engineIdsOf(at('mp')))[rank],
      transfer_id: p.kv!['transfer_id'],
    });
    expect(d.json).toMatchObject({ stream: true, max_tokens: 5 });
    expect(d.headers['x-data-parallel-rank']).toBeUndefined();
    expect(d.headers['x-request-id']).toBe(p.headers['x-request-id']);
    expect(at('md').counters()['kvPullsReceived']).toBe(before.received + 1);
    expect(at('mp').counters()['kvPullsServed']).toBe(before.served + 1);
    expect(at('md').counters()).toMatchObject({ localPrefillFallbacks: 0, kvParamsInvalid: 0 });
    expect(at('mp').counters()['kvTransferIdsMissing']).toBe(0);
  });

  it('upstream vLLM Mooncake, not streamed: the decode answers from transferred KV; the DP ranks take turns', async () => {
    const ranks = new Set<string>();
    for (let i = 0; i < 2; i++) {
      const res = await client().chat.completions.create({ model: 'mc', messages: [{ role: 'user', content: LONG }], max_tokens: 3 });
      expect(res.usage?.completion_tokens).toBe(3);
      ranks.add(String(last(at('mp')).headers['x-data-parallel-rank']));
    }
    expect([...ranks].sort()).toEqual(['0', '1']);
    expect(at('md').counters()['localPrefillFallbacks']).toBe(0);
  });

  it('the same engines sent the sequential flow (no probe result): the prefill frees its KV, the decode prefills again — counted and logged once per pod', async () => {
    const before = { fallbacks: at('md').counters()['localPrefillFallbacks'], missing: at('mp').counters()['kvTransferIdsMissing'] };
    for (let i = 0; i < 2; i++) expect((await streamed('mc-unprobed')).length).toBeGreaterThan(0);
    expect(at('mp').counters()['kvTransferIdsMissing']).toBe(before.missing + 2);
    expect(at('md').counters()['localPrefillFallbacks']).toBe(before.fallbacks + 2);
    expect(await gatewayMetric(h, 'triad_gateway_kv_params_missing_total{connector="vllm-mooncake"}')).toBe(2);
    const warned = h.logLines.filter((l) => String(l['msg']).startsWith('prefill answered without kv_transfer_params'));
    expect(warned).toHaveLength(1);
    expect(warned[0]).toMatchObject({ prefill: 'default.mc-unprobed.mp', modelServer: 'default/mc-unprobed', kvConnector: 'mooncake' });
  });

  it("kvConnector.implementation: vllm wins over the record's flow", async () => {
    const before = at('md').counters()['kvPullsReceived'];
    expect((await streamed('mc-pinned')).length).toBeGreaterThan(0);
    expect(last(at('mp')).kv).toMatchObject({ transfer_id: expect.any(String) });
    expect(at('md').counters()['kvPullsReceived']).toBe(before + 1);
  });

  it('a prefill that fails before the KV is ready: the decode is aborted and the request retried on the next pair, never prefilled locally', async () => {
    setFailover(true);
    try {
      at('mp2').setFault({ mode: 'error500', count: 1 });
      const before = {
        d2: at('md2').counters(),
        d2Requests: inferenceRequests(at('md2')).length,
        d: at('md').counters()['kvPullsReceived'],
        retries: await gatewayMetric(h, 'triad_gateway_retries_total{model="mc",stage="prefill"}'),
        errors: await gatewayMetric(h, 'triad_gateway_upstream_legs_total{model_server="default/mc",stage="prefill",outcome="error"}'),
      };
      expect((await streamed('mc')).length).toBeGreaterThan(0);
      // The first pair's decode got its request (concurrently) and was let go: it prefilled nothing itself.
      expect(inferenceRequests(at('md2')).length).toBe(before.d2Requests + 1);
      expect(at('md2').counters()['localPrefillFallbacks']).toBe(before.d2['localPrefillFallbacks']);
      expect(at('md2').counters()['kvPullsReceived']).toBe(before.d2['kvPullsReceived']);
      // The second pair served it from transferred KV.
      expect(at('md').counters()['kvPullsReceived']).toBe(before.d + 1);
      expect(await gatewayMetric(h, 'triad_gateway_retries_total{model="mc",stage="prefill"}')).toBe(before.retries + 1);
      expect(await gatewayMetric(h, 'triad_gateway_upstream_legs_total{model_server="default/mc",stage="prefill",outcome="error"}')).toBe(
        before.errors + 1,
      );
    } finally {
      setFailover(false);
    }
  });

  it("vllm-ascend's Mooncake: the sequential flow, the prefill's params relayed byte for byte", async () => {
    expect((await streamed('mc-ascend')).length).toBeGreaterThan(0);
    const p = last(at('ap'));
    const d = last(at('ad'));
    expect(p.kv).toEqual({
      do_remote_decode: true,
      do_remote_prefill: false,
      remote_engine_id: null,
      remote_block_ids: null,
      remote_host: null,
      remote_port: null,
    });
    expect(d.kv).toMatchObject({ do_remote_prefill: true, remote_host: at('ap').host, remote_request_id: p.headers['x-request-id'] });
    expect(at('ad').counters()).toMatchObject({ kvPullsReceived: 1, localPrefillFallbacks: 0 });
  });

  it('NIXL push: sequential until the prefill has answered its coordinates, then P and D at once with a transfer id', async () => {
    expect((await streamed('push')).length).toBeGreaterThan(0);
    const first = last(at('pd')).kv as Kv;
    // The first decode got the prefill's own params (block ids and all): the sequential flow.
    expect(first).toMatchObject({ transfer_mode: 'push', remote_block_ids: expect.any(Array) });
    expect((await streamed('push')).length).toBeGreaterThan(0);
    const p = last(at('pp'));
    const d = last(at('pd'));
    expect(p.kv).toMatchObject({ do_remote_decode: true, transfer_id: expect.stringMatching(/^xfer-/) });
    expect(d.kv).toEqual({
      do_remote_decode: false,
      do_remote_prefill: true,
      remote_engine_id: first['remote_engine_id'],
      remote_host: at('pp').host,
      remote_port: at('pp').port,
      tp_size: 1,
      pp_size: 1,
      remote_request_id: d.headers['x-request-id'],
      transfer_id: p.kv!['transfer_id'],
    });
    expect(at('pd').counters()).toMatchObject({ kvPushRegistrations: 2, kvPullsReceived: 2, localPrefillFallbacks: 0 });
    expect(at('pp').counters()['kvPushesSent']).toBe(2);
  });

  it('LMCache with a shared backend: the decode loads what the prefill stored; no params to relay, none counted missing', async () => {
    const missing = async () => {
      const text = await (await fetch(`http://127.0.0.1:${h.gateway.metricsPort}/metrics`)).text();
      return text
        .split('\n')
        .filter((l) => l.startsWith('triad_gateway_kv_params_missing_total{'))
        .reduce((sum, l) => sum + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
    };
    const before = await missing();
    expect((await streamed('lmc')).length).toBeGreaterThan(0);
    expect(last(at('lp')).json).toMatchObject({ max_tokens: 1, stream: false });
    expect(last(at('ld')).kv).toBeUndefined();
    expect(at('ld').counters()).toMatchObject({ kvPullsReceived: 1, localPrefillFallbacks: 0 });
    expect(await missing()).toBe(before);
  });
});
