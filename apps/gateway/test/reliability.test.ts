import type { EndpointRef } from '@triad/bus';
import type { SimEngineHandle } from '@triad/engine-sim';
import { waitFor } from '@triad/testing';
import { accessLines, inferenceRequests, resetSims, startHarness, type Harness } from './support/harness';

const MODEL = 'm-reliable';

async function chat(h: Harness, model: string, extra: Record<string, unknown> = {}, init: RequestInit = {}): Promise<Response> {
  return fetch(`${h.gateway.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 4, ...extra }),
    ...init,
  });
}

describe('gateway reliability: retries before the first byte, timeouts, disconnects, scheduler outage', () => {
  let h: Harness;
  let a: SimEngineHandle;
  let b: SimEngineHandle;
  let sgP: SimEngineHandle;
  let sgD: SimEngineHandle;
  let e0: SimEngineHandle;
  let e1: SimEngineHandle;
  let ra: EndpointRef;
  let rb: EndpointRef;

  beforeAll(async () => {
    // A budget no loaded machine runs out of: a late reply of the stand-in scheduler would otherwise flip a request
    // to a local decision (other endpoint order) and break the checks below. The scheduler-down test does not wait
    // on it: with nobody subscribed, NATS answers "no responders" at once.
    h = await startHarness({ config: { scheduleBudgetMs: 30_000, schedulerBackoffMs: 0 } });
    a = await h.startSim({ engine: 'vllm', role: 'both', host: '127.0.6.1', model: MODEL });
    b = await h.startSim({ engine: 'vllm', role: 'both', host: '127.0.6.2', model: MODEL });
    const base = {
      model: MODEL,
      inferenceEngine: 'vLLM' as const,
      workloadSelector: { matchLabels: { app: 'r' } },
      workloadPort: { port: 8000, protocol: 'http' as const },
    };
    await h.putServer('retry', base);
    await h.putServer('noretry', { ...base, trafficPolicy: { retry: { attempts: 0, retryInterval: '10ms' } } });
    await h.putServer('slow', { ...base, trafficPolicy: { timeout: '300ms' } });
    for (const s of ['retry', 'noretry', 'slow'])
      await h.putRoute(s, { modelName: s, rules: [{ targetModels: [{ modelServerName: s, weight: 100 }] }] });
    ra = await h.putEndpoint('retry', 'a', 'aggregated', a);
    rb = await h.putEndpoint('retry', 'b', 'aggregated', b);
    await h.putEndpoint('noretry', 'a', 'aggregated', a);
    await h.putEndpoint('slow', 'a', 'aggregated', a);
    // A slow-decoding SGLang pair, so a stream is still running when the client goes away.
    sgP = await h.startSim({
      engine: 'sglang',
      role: 'prefill',
      host: '127.0.6.3',
      model: MODEL,
      bootstrapPort: 0,
      latency: { decodeMsPerToken: 20 },
    });
    sgD = await h.startSim({ engine: 'sglang', role: 'decode', host: '127.0.6.4', model: MODEL, latency: { decodeMsPerToken: 20 } });
    await h.putServer('sg-slow', {
      ...base,
      inferenceEngine: 'SGLang',
      workloadSelector: { matchLabels: { app: 'sg' }, pdGroup: { groupKey: 'g', prefillLabels: { r: 'p' }, decodeLabels: { r: 'd' } } },
    });
    await h.putRoute('sg-slow', { modelName: 'sg-slow', rules: [{ targetModels: [{ modelServerName: 'sg-slow', weight: 100 }] }] });
    const sp = await h.putEndpoint('sg-slow', 'p', 'prefill', sgP, { group: 'g1' });
    const sd = await h.putEndpoint('sg-slow', 'd', 'decode', sgD, { group: 'g1' });
    // Two slow vLLM encoders (and a decode) for an EPD request whose encode legs are in flight together.
    e0 = await h.startSim({
      engine: 'vllm',
      role: 'encode',
      host: '127.0.6.5',
      model: MODEL,
      latencyProfile: 'realistic',
      latency: { encodeMsPerItem: 1000 },
    });
    e1 = await h.startSim({
      engine: 'vllm',
      role: 'encode',
      host: '127.0.6.6',
      model: MODEL,
      latencyProfile: 'realistic',
      latency: { encodeMsPerItem: 1000 },
    });
    await h.putServer('vl-slow', {
      ...base,
      pipelineMode: 'epd',
      workloadSelector: { matchLabels: { app: 'vl' }, pdGroup: { groupKey: 'g', encodeLabels: { r: 'e' }, decodeLabels: { r: 'd' } } },
    });
    await h.putRoute('vl-slow', { modelName: 'vl-slow', rules: [{ targetModels: [{ modelServerName: 'vl-slow', weight: 100 }] }] });
    const re0 = await h.putEndpoint('vl-slow', 'e0', 'encode', e0, { group: 'g1' });
    const re1 = await h.putEndpoint('vl-slow', 'e1', 'encode', e1, { group: 'g1' });
    const rd = await h.putEndpoint('vl-slow', 'd', 'decode', b, { group: 'g1' });
    h.decide = (r) => {
      if (r.modelServer === 'vl-slow') {
        return {
          id: r.id,
          ok: true,
          mode: 'epd',
          attempts: [{ endpoint: rd }],
          encoders: r.mediaItems.map((m) => ({ item: m.index, endpoint: m.index === 0 ? re0 : re1, alternates: [], affinity: false })),
        };
      }
      if (r.modelServer === 'sg-slow') return { id: r.id, ok: true, mode: 'pd', encoders: [], attempts: [{ endpoint: sd, prefill: sp }] };
      return {
        id: r.id,
        ok: true,
        mode: 'aggregated',
        encoders: [],
        attempts: r.modelServer === 'slow' ? [{ endpoint: ra }] : [{ endpoint: ra }, { endpoint: rb }],
      };
    };
    for (const s of ['retry', 'noretry', 'slow', 'sg-slow', 'vl-slow']) await h.waitForModel(s);
  });
  afterAll(async () => {
    await h?.close();
  });
  beforeEach(() => resetSims(h));

  it.each(['error500', 'error429', 'refuse'] as const)('retries on the alternate after %s before the first byte', async (mode) => {
    a.setFault({ mode, count: 1 });
    const res = await chat(h, 'retry', {}, { headers: { 'content-type': 'application/json', 'x-request-id': `retry-${mode}` } });
    expect(res.status).toBe(200);
    expect(inferenceRequests(b)).toHaveLength(1);
    expect(inferenceRequests(b)[0]?.headers['x-request-id']).toBe(`retry-${mode}`);
    await waitFor(() => accessLines(h).find((l) => l['request_id'] === `retry-${mode}`), { what: 'access line' });
    expect(accessLines(h).find((l) => l['request_id'] === `retry-${mode}`)).toMatchObject({
      status_code: 200,
      upstream_attempts: 2,
      endpoints: { aggregated: ['a', 'b'] },
    });
  });

  it('counts each failed leg as an error of its stage and model server (triad_gateway_upstream_legs_total)', async () => {
    const legs = async (outcome: string) => {
      const text = await (await fetch(`http://127.0.0.1:${h.gateway.metricsPort}/metrics`)).text();
      const series = `triad_gateway_upstream_legs_total\\{model_server="default/retry",stage="aggregated",outcome="${outcome}"\\}`;
      const m = new RegExp(`^${series} (\\d+)$`, 'm').exec(text);
      return Number(m?.[1] ?? NaN);
    };
    const [errors, oks] = [await legs('error'), await legs('ok')];
    a.setFault({ mode: 'error500', count: 1 });
    const res = await chat(h, 'retry', {}, { headers: { 'content-type': 'application/json', 'x-request-id': 'legs-1' } });
    expect(res.status).toBe(200);
    await waitFor(() => accessLines(h).find((l) => l['request_id'] === 'legs-1'), { what: 'access line (the request has ended)' });
    expect(await legs('error')).toBe(errors + 1);
    expect(await legs('ok')).toBe(oks + 1);
  });

  it('does not retry once the first byte reached the client: the stream ends with an SSE error and [DONE]', async () => {
    a.setFault({ mode: 'die-mid-stream', count: 1 });
    const res = await chat(h, 'retry', { stream: true, max_tokens: 16 });
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text).toMatch(
      new RegExp(
        String.raw`data: \{"error":\{"message":"aggregated failed: [^"]*",` +
          String.raw`"type":"server_error","param":null,"code":"GATEWAY_UPSTREAM_ERROR"\}\}\n\ndata: \[DONE\]\n\n$`,
      ),
    );
    expect(text.startsWith('data: {')).toBe(true);
    expect(inferenceRequests(b)).toHaveLength(0);
  });

  it('follows trafficPolicy.retry.attempts: 0 means no retry (engine 5xx → 502)', async () => {
    a.setFault({ mode: 'error500', count: 1 });
    const res = await chat(h, 'noretry');
    expect(res.status).toBe(502);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('GATEWAY_UPSTREAM_ERROR');
    expect(inferenceRequests(b)).toHaveLength(0);
  });

  it('passes an engine 429 on as 429 with Retry-After when no retry is left', async () => {
    a.setFault({ mode: 'error429', count: 1 });
    const res = await chat(h, 'noretry');
    expect(res.status).toBe(429);
    expect(res.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(((await res.json()) as { error: { type: string } }).error.type).toBe('rate_limit_error');
  });

  it('answers 504 when the first byte does not come within trafficPolicy.timeout', async () => {
    a.setFault({ mode: 'hang', count: 1 });
    const res = await chat(h, 'slow');
    expect(res.status).toBe(504);
    const err = ((await res.json()) as { error: { code: string; message: string } }).error;
    expect(err.code).toBe('GATEWAY_UPSTREAM_TIMEOUT');
    expect(err.message).toMatch(/first-byte timeout of 300 ms/);
  });

  it('aborts the relayed decode leg when the client disconnects mid-stream (SGLang PD)', async () => {
    const abort = new AbortController();
    const res = await chat(h, 'sg-slow', { stream: true, max_tokens: 400 }, { signal: abort.signal });
    expect(res.status).toBe(200);
    const first = await (res.body as ReadableStream<Uint8Array>).getReader().read();
    expect(first.done).toBe(false);
    abort.abort();
    await waitFor(() => (sgD.counters()['aborted'] ?? 0) > 0, { what: 'decode leg aborted on the engine' });
    await waitFor(
      () =>
        accessLines(h).some(
          (l) =>
            l['model_name'] === 'sg-slow' &&
            l['status_code'] === 499 &&
            (l['error'] as { type?: string } | undefined)?.type === 'GATEWAY_CLIENT_ABORTED',
        ),
      { what: 'access line of the aborted request' },
    );
  });

  it('aborts every leg in flight (two concurrent encoder requests) when the client disconnects', async () => {
    const abort = new AbortController();
    const body = {
      stream: true,
      messages: [
        {
          role: 'user',
          content: [
            { type: 'image_url', image_url: { url: 'https://x/1.png' } },
            { type: 'image_url', image_url: { url: 'https://x/2.png' } },
          ],
        },
      ],
    };
    const pending = chat(h, 'vl-slow', body, { signal: abort.signal }).catch((e: Error) => e);
    await waitFor(() => inferenceRequests(e0).length === 1 && inferenceRequests(e1).length === 1, { what: 'both encoder legs in flight' });
    abort.abort();
    const got = await pending;
    expect(got).toMatchObject({ name: 'AbortError' });
    await waitFor(() => (e0.counters()['aborted'] ?? 0) > 0 && (e1.counters()['aborted'] ?? 0) > 0, { what: 'both encoder legs aborted' });
  });

  it('decides locally with libs/scheduling when the scheduler is down, and counts it', async () => {
    await h.stopScheduler();
    try {
      const res = await chat(h, 'retry', {}, { headers: { 'content-type': 'application/json', 'x-request-id': 'local-1' } });
      expect(res.status).toBe(200);
      await waitFor(() => accessLines(h).find((l) => l['request_id'] === 'local-1'), { what: 'access line' });
      expect(accessLines(h).find((l) => l['request_id'] === 'local-1')).toMatchObject({ decided_locally: true, status_code: 200 });
      const metrics = await (await fetch(`http://127.0.0.1:${h.gateway.metricsPort}/metrics`)).text();
      expect(metrics).toMatch(/triad_gateway_local_decisions_total\{reason="(unavailable|timeout)"\} [1-9]/);
    } finally {
      h.startScheduler();
    }
    await waitFor(
      async () =>
        (await chat(h, 'retry', {}, { headers: { 'content-type': 'application/json', 'x-request-id': 'back-1' } })).status === 200 &&
        accessLines(h).some((l) => l['request_id'] === 'back-1' && l['decided_locally'] === false),
      { what: 'scheduler used again' },
    );
  });
});
