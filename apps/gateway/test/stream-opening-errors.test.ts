import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import OpenAI, { APIError } from 'openai';
import type { SimEngineHandle, SimEngineOptions } from '@triad/engine-sim';
import { waitFor } from '@triad/testing';
import {
  accessLines,
  decideByServer,
  inferenceRequests,
  resetSims,
  sseData,
  startHarness,
  type FixedDecision,
  type Harness,
} from './support/harness';

// Engines open a stream before some failures happen: vLLM answers 200 and then reports a request it finished with an
// error (a failed KV load, an engine error) as the stream's first event; SGLang's scheduler aborts a request after
// dispatch (a decode whose KV never came: 500) and a /generate stream carries that as its first output. Nothing has
// reached the client then, so the gateway fails the leg as the 500 it stands for and retries, instead of answering
// 200 with an error inside. The sims' `error-in-stream` fault writes each engine's shape.

const MODEL = 'Qwen/Qwen2.5-7B';
// Long enough to need a prefill leg (about 1,000 simulated tokens).
const LONG = `Summarise this report. ${'The quarterly numbers moved in every region and every product line. '.repeat(60)}`;

async function gatewayMetric(h: Harness, series: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${h.gateway.metricsPort}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? 0 : Number(line.slice(series.length + 1));
}

/** A streamed chat request with its request id; `maxTokens` 2 unless given. */
function chatRequest(h: Harness, model: string, requestId: string, maxTokens = 2): Promise<Response> {
  return fetch(`${h.gateway.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-request-id': requestId },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: maxTokens, stream: true }),
  });
}

const pdSelector = (app: string) => ({
  matchLabels: { app },
  pdGroup: { groupKey: 'g', prefillLabels: { r: 'p' }, decodeLabels: { r: 'd' } },
});

describe('gateway: a stream whose first event is an engine failure is a failed leg, retried before anything reached the client', () => {
  let h: Harness;
  const sims: Record<string, SimEngineHandle> = {};
  const decisions = new Map<string, FixedDecision>();
  const chat = (model: string, requestId: string, maxTokens?: number) => chatRequest(h, model, requestId, maxTokens);
  let rawEngine: Server;
  let rawAnswer = '';
  const client = () => new OpenAI({ baseURL: `${h.gateway.url}/v1`, apiKey: 'x', maxRetries: 0 });

  async function server(name: string, engine: 'vLLM' | 'SGLang', pd: boolean, extra: Record<string, unknown> = {}): Promise<void> {
    await h.putServer(name, {
      model: MODEL,
      inferenceEngine: engine,
      workloadPort: { port: 8000, protocol: 'http' },
      workloadSelector: pd ? pdSelector(name) : { matchLabels: { app: name } },
      ...(pd && engine === 'vLLM' ? { kvConnector: { type: 'nixl' as const } } : {}),
      ...extra,
    });
    await h.putRoute(name, { modelName: name, rules: [{ targetModels: [{ modelServerName: name, weight: 100 }] }] });
  }

  beforeAll(async () => {
    // Scheduling answers never run late here, whatever the machine's load (a late one would be decided locally).
    h = await startHarness({ config: { scheduleBudgetMs: 30_000 } });
    let octet = 1;
    const sim = async (
      name: string,
      engine: 'vllm' | 'sglang',
      role: 'both' | 'prefill' | 'decode',
      extra: Partial<SimEngineOptions> = {},
    ) => {
      sims[name] = await h.startSim({
        ...extra,
        engine,
        role,
        model: MODEL,
        host: `127.0.9.${octet++}`,
        ...(engine === 'sglang' && role === 'prefill' ? { bootstrapPort: 0 } : {}),
        ...(engine === 'vllm' && role === 'prefill' ? { kvLeaseMs: 600_000 } : {}),
      });
      return sims[name];
    };
    // Aggregated, both engines: pods a and b.
    for (const engine of ['vllm', 'sglang'] as const) {
      const name = `agg-${engine}`;
      await server(name, engine === 'vllm' ? 'vLLM' : 'SGLang', false);
      const a = await h.putEndpoint(name, 'a', 'aggregated', await sim(`${engine}-a`, engine, 'both'));
      const b = await h.putEndpoint(name, 'b', 'aggregated', await sim(`${engine}-b`, engine, 'both'));
      decisions.set(name, { mode: 'aggregated', attempts: [{ endpoint: a }, { endpoint: b }] });
    }
    // vLLM pods that write `: keep-alive` comments into idle streams (`--sse-keep-alive-interval`), decoding slowly
    // enough for comments between tokens; once with a first-byte budget of 300 ms.
    const keepAlive = { sseKeepAliveIntervalMs: 5, latencyProfile: 'realistic', latency: { decodeMsPerToken: 40 } } as const;
    for (const name of ['ka', 'ka-budget']) {
      await server(name, 'vLLM', false, name === 'ka-budget' ? { trafficPolicy: { timeout: '300ms' } } : {});
      const a = await h.putEndpoint(name, 'a', 'aggregated', sims['ka-a'] ?? (await sim('ka-a', 'vllm', 'both', keepAlive)));
      const b = await h.putEndpoint(name, 'b', 'aggregated', sims['ka-b'] ?? (await sim('ka-b', 'vllm', 'both', keepAlive)));
      decisions.set(name, { mode: 'aggregated', attempts: [{ endpoint: a }, { endpoint: b }] });
    }
    // An engine whose stream ends before any event (one error event without its blank line, or comments only), then
    // the vLLM sim `vllm-b` as the alternate: a plain socket server stands in for a broken engine.
    rawEngine = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.end(rawAnswer);
      });
    });
    await new Promise<void>((done) => rawEngine.listen(0, '127.0.9.200', done));
    const raw = { host: '127.0.9.200', port: (rawEngine.address() as AddressInfo).port, engine: 'vllm', model: MODEL } as SimEngineHandle;
    await server('raw', 'vLLM', false);
    const rawRef = await h.putEndpoint('raw', 'raw', 'aggregated', raw);
    const fallback = await h.putEndpoint('raw', 'b', 'aggregated', sims['vllm-b']);
    decisions.set('raw', { mode: 'aggregated', attempts: [{ endpoint: rawRef }, { endpoint: fallback }] });
    // The same vLLM pod a without retries: the client gets the failure as an HTTP error.
    await server('agg-vllm-noretry', 'vLLM', false, { trafficPolicy: { retry: { attempts: 0, retryInterval: '10ms' } } });
    const only = await h.putEndpoint('agg-vllm-noretry', 'a', 'aggregated', sims['vllm-a']);
    decisions.set('agg-vllm-noretry', { mode: 'aggregated', attempts: [{ endpoint: only }] });
    // vLLM NIXL PD (the sequential flow): one prefill, two decodes.
    await server('pd-vllm', 'vLLM', true);
    const vp = await h.putEndpoint('pd-vllm', 'p', 'prefill', await sim('vllm-p', 'vllm', 'prefill'), { group: 'g1' });
    const vd1 = await h.putEndpoint('pd-vllm', 'd1', 'decode', await sim('vllm-d1', 'vllm', 'decode'), { group: 'g1' });
    const vd2 = await h.putEndpoint('pd-vllm', 'd2', 'decode', await sim('vllm-d2', 'vllm', 'decode'), { group: 'g1' });
    decisions.set('pd-vllm', {
      mode: 'pd',
      attempts: [
        { prefill: vp, endpoint: vd1 },
        { prefill: vp, endpoint: vd2 },
      ],
    });
    // SGLang PD: two pairs.
    await server('pd-sglang', 'SGLang', true);
    const pairs = [];
    for (const i of [1, 2]) {
      const p = await h.putEndpoint('pd-sglang', `p${i}`, 'prefill', await sim(`sglang-p${i}`, 'sglang', 'prefill'), { group: 'g1' });
      const d = await h.putEndpoint('pd-sglang', `d${i}`, 'decode', await sim(`sglang-d${i}`, 'sglang', 'decode'), { group: 'g1' });
      pairs.push({ prefill: p, endpoint: d });
    }
    decisions.set('pd-sglang', { mode: 'pd', attempts: pairs });
    h.decide = decideByServer(decisions);
    for (const name of decisions.keys()) await h.waitForModel(name);
  });
  afterAll(async () => {
    await h?.close();
    await new Promise<void>((done) => (rawEngine ? rawEngine.close(() => done()) : done()));
  });
  beforeEach(() => resetSims(h));

  it.each(['vllm', 'sglang'] as const)(
    '%s aggregated: the stream comes whole from the other pod, the failed leg counted',
    async (engine) => {
      const server = `agg-${engine}`;
      const errors = `triad_gateway_upstream_legs_total{model_server="default/${server}",stage="aggregated",outcome="error"}`;
      const before = await gatewayMetric(h, errors);
      sims[`${engine}-a`].setFault({ mode: 'error-in-stream', count: 1 });
      const stream = await client().chat.completions.create(
        { model: server, messages: [{ role: 'user', content: 'hi' }], max_tokens: 4, stream: true },
        { headers: { 'x-request-id': `opening-${engine}` } },
      );
      let text = '';
      let finish: string | null | undefined;
      for await (const c of stream) {
        text += c.choices[0]?.delta.content ?? '';
        finish = c.choices[0]?.finish_reason ?? finish;
      }
      expect(text.length).toBeGreaterThan(0);
      expect(finish).toBe('length');
      expect(inferenceRequests(sims[`${engine}-a`])).toHaveLength(1);
      expect(inferenceRequests(sims[`${engine}-b`])).toHaveLength(1);
      const line = await waitFor(() => accessLines(h).find((l) => l['request_id'] === `opening-${engine}`), { what: 'access line' });
      expect(line).toMatchObject({ status_code: 200, upstream_attempts: 2, endpoints: { aggregated: ['a', 'b'] } });
      expect(await gatewayMetric(h, errors)).toBe(before + 1);
    },
  );

  it("vLLM's keep-alive comments before the first event are no answer: a stream that fails after them is still retried", async () => {
    // The failing pod's stream opens, stays idle for 80 ms (keep-alives every 5 ms), then reports the error.
    sims['ka-a'].setFault({ mode: 'error-in-stream', count: 1, delayMs: 80 });
    const res = await chat('ka', 'ka-retry');
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text.startsWith('data: {')).toBe(true);
    expect(text).not.toContain('"error"');
    expect(text.endsWith('data: [DONE]\n\n')).toBe(true);
    const line = await waitFor(() => accessLines(h).find((l) => l['request_id'] === 'ka-retry'), { what: 'access line' });
    expect(line).toMatchObject({ status_code: 200, upstream_attempts: 2, endpoints: { aggregated: ['a', 'b'] } });
  });

  it('keep-alive comments do not stop the first-byte budget: a pod that only keeps its stream alive times out', async () => {
    sims['ka-a'].setFault({ mode: 'error-in-stream', count: 1, delayMs: 20_000 });
    const res = await chat('ka-budget', 'ka-budget');
    expect(res.status).toBe(200);
    expect(await res.text()).toMatch(/data: \[DONE\]\n\n$/);
    const line = await waitFor(() => accessLines(h).find((l) => l['request_id'] === 'ka-budget'), { what: 'access line' });
    expect(line).toMatchObject({ status_code: 200, upstream_attempts: 2, endpoints: { aggregated: ['a', 'b'] } });
  });

  it('keep-alive comments between tokens reach the client, and an SSE client reads the answer through them', async () => {
    const text = await (await chat('ka', 'ka-relay', 6)).text();
    expect(text.startsWith('data: {')).toBe(true);
    expect(text).toContain('\n\n: keep-alive\n\n');
    const stream = await client().chat.completions.create({
      model: 'ka',
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 4,
      stream: true,
    });
    let chunks = 0;
    for await (const c of stream) chunks += c.choices[0]?.delta.content ? 1 : 0;
    expect(chunks).toBe(4);
  });

  it('without a retry left the client gets an HTTP error naming the engine failure, not a 200 stream holding it', async () => {
    sims['vllm-a'].setFault({ mode: 'error-in-stream', count: 1 });
    const err = await client()
      .chat.completions.create({ model: 'agg-vllm-noretry', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4, stream: true })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(APIError);
    expect((err as APIError).status).toBe(502);
    expect((err as APIError).message).toContain('error event before any token: Internal server error');
    expect((err as APIError).code).toBe('GATEWAY_UPSTREAM_ERROR');
  });

  it('vLLM NIXL PD: a decode that opens its stream with an error took no KV; the hand-off is released and the next pair serves it', async () => {
    const [p, d1, d2] = [sims['vllm-p'], sims['vllm-d1'], sims['vllm-d2']];
    const stranded = 'triad_gateway_kv_stranded_total{engine="vLLM",reason="decode_failed",action="release"}';
    const before = {
      stranded: await gatewayMetric(h, stranded),
      pulls: d2.counters()['kvPullsReceived'],
      served: p.counters()['kvPullsServed'],
    };
    d1.setFault({ mode: 'error-in-stream', count: 1 });
    const stream = await client().chat.completions.create({
      model: 'pd-vllm',
      messages: [{ role: 'user', content: LONG }],
      max_tokens: 5,
      stream: true,
    });
    let text = '';
    for await (const c of stream) text += c.choices[0]?.delta.content ?? '';
    expect(text.length).toBeGreaterThan(0);
    // Two prefill legs ran (one per pair), and D2 read its KV instead of computing the prompt.
    expect(inferenceRequests(p).filter((r) => (r.body as { max_tokens?: number }).max_tokens === 1)).toHaveLength(2);
    expect(d2.counters()['localPrefillFallbacks'] ?? 0).toBe(0);
    // The first hand-off was released through D2 (a one-token read), the second read by the retry.
    expect(await gatewayMetric(h, stranded)).toBe(before.stranded + 1);
    await waitFor(() => p.kvHeld().blocks === 0, { what: 'the prefill to hold no KV' });
    expect(d2.counters()['kvPullsReceived']).toBe(before.pulls + 2);
    expect(p.counters()['kvPullsServed']).toBe(before.served + 2);
  });

  it('SGLang PD /generate: a decode aborted with 500 in its first output is retried on the next pair, whose room is matched', async () => {
    const [d1, p2, d2] = [sims['sglang-d1'], sims['sglang-p2'], sims['sglang-d2']];
    const matched = d2.counters()['roomsMatched'] ?? 0;
    d1.setFault({ mode: 'error-in-stream', count: 1 });
    const res = await fetch(`${h.gateway.url}/generate`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'pd-sglang', text: LONG, stream: true, sampling_params: { max_new_tokens: 3 } }),
    });
    expect(res.status).toBe(200);
    const events = sseData(await res.text());
    expect(events.at(-1)).toBe('[DONE]');
    const outputs = events.slice(0, -1).map((e) => JSON.parse(e) as { meta_info: { completion_tokens: number; finish_reason: unknown } });
    expect(outputs.map((o) => o.meta_info.completion_tokens)).toEqual([1, 2, 3]);
    expect(JSON.stringify(outputs)).not.toContain('abort');
    expect(inferenceRequests(d1)).toHaveLength(1);
    expect(inferenceRequests(p2)).toHaveLength(1);
    expect(d2.counters()['roomsMatched']).toBe(matched + 1);
  });

  it('SGLang PD /generate with n = 2 fanned out: a sample aborted with 500 fails the try, and the next pair serves both samples', async () => {
    const [d1, d2] = [sims['sglang-d1'], sims['sglang-d2']];
    const matched = d2.counters()['roomsMatched'] ?? 0;
    d1.setFault({ mode: 'error-in-stream', count: 1 });
    const res = await fetch(`${h.gateway.url}/generate`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'pd-sglang', text: LONG, stream: true, sampling_params: { max_new_tokens: 2, n: 2 } }),
    });
    expect(res.status).toBe(200);
    const events = sseData(await res.text());
    expect(events.at(-1)).toBe('[DONE]');
    const outputs = events.slice(0, -1).map((e) => JSON.parse(e) as { index: number; meta_info: { finish_reason: unknown } });
    expect(new Set(outputs.map((o) => o.index))).toEqual(new Set([0, 1]));
    expect(JSON.stringify(outputs)).not.toContain('abort');
    expect(d2.counters()['roomsMatched']).toBe(matched + 2);
  });

  it.each([
    [
      'one error event without its blank line',
      'data: {"error":{"message":"engine died","type":"InternalServerError","param":null,"code":500}}',
    ],
    ['keep-alive comments only', ': keep-alive\n\n: keep-alive\n\n'],
  ])('a stream that ends before its first event (%s) fails the leg, and the alternate answers', async (_what, answer) => {
    rawAnswer = answer;
    const res = await chat('raw', `raw-${answer.length}`);
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text.startsWith('data: {')).toBe(true);
    expect(text).not.toContain('engine died');
    expect(text.endsWith('data: [DONE]\n\n')).toBe(true);
    const line = await waitFor(() => accessLines(h).find((l) => l['request_id'] === `raw-${answer.length}`), { what: 'access line' });
    expect(line).toMatchObject({ status_code: 200, upstream_attempts: 2, endpoints: { aggregated: ['raw', 'b'] } });
  });
});
