import type { SimEngineHandle } from '@triad/engine-sim';
import { ErrorCode, TriadError } from '@triad/errors';
import { RateLimitedError, RequestLocal, type RequestContext, type RequestHooks, type Usage } from '@triad/request';
import { waitFor } from '@triad/testing';
import { inferenceRequests, startHarness, type Harness } from './support/harness';

const MODEL = 'm-errors';

interface OpenAiErrorBody {
  error: { message: string; type: string; param: string | null; code: string };
}

async function post(
  h: Harness,
  body: string,
  headers: Record<string, string> = {},
  path = '/v1/chat/completions',
): Promise<{ status: number; body: OpenAiErrorBody; headers: Headers }> {
  const res = await fetch(`${h.gateway.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
  return { status: res.status, body: (await res.json()) as OpenAiErrorBody, headers: res.headers };
}

const ok = (model = 'ok') => JSON.stringify({ model, messages: [{ role: 'user', content: 'x' }], max_tokens: 2 });

describe('gateway errors (OpenAI-shaped, right status) and lifecycle hooks', () => {
  let h: Harness;
  let sim: SimEngineHandle;
  const ended: { req: RequestContext; outcome: { status: number; usage: Usage | undefined } }[] = [];
  const order: string[] = [];
  const trace = new RequestLocal<string>('test.trace');

  const admission: RequestHooks = {
    admit(req) {
      order.push(`admit:${req.id}`);
      if (req.headers['x-test'] === 'deny') throw new TriadError(ErrorCode.GatewayUnauthorized, 'invalid API key');
      if (req.headers['x-test'] === 'limit') throw new RateLimitedError('input token rate limit exceeded', 'input_rate_limited', 7);
      if (req.headers['x-test'] === 'queue') return Promise.resolve();
      return undefined;
    },
    onEnd(req) {
      ended.push({ req, outcome: { status: req.result.status, usage: req.result.usage } });
    },
  };
  const tracing: RequestHooks = {
    onRequest(req) {
      order.push(`request:${req.id}`);
      trace.set(req, 'span-1');
    },
    onRouted(req) {
      order.push(`routed:${req.routing.route}`);
    },
    onScheduled(req) {
      order.push(`scheduled:${req.schedule?.local}`);
    },
    onStageStart(req, stage) {
      order.push(`stage:${stage}`);
      return { headers: { 'x-span': `${String(trace.get(req))}/${stage}` }, end: (okay) => order.push(`stage-end:${okay}`) };
    },
    onFirstToken() {
      order.push('first-token');
    },
    onEnd(req) {
      order.push(`end:${req.result.status}`);
    },
  };

  beforeAll(async () => {
    h = await startHarness({ config: { bodyLimit: 4096 }, hooks: [tracing, admission] });
    sim = await h.startSim({ engine: 'vllm', role: 'both', host: '127.0.7.1', model: MODEL });
    const server = {
      model: MODEL,
      inferenceEngine: 'vLLM' as const,
      workloadSelector: { matchLabels: { app: 'e' } },
      workloadPort: { port: 8000, protocol: 'http' as const },
    };
    await h.putServer('ok', server);
    await h.putServer('empty', server);
    await h.putRoute('ok', { modelName: 'ok', rules: [{ targetModels: [{ modelServerName: 'ok', weight: 100 }] }] });
    await h.putRoute('empty', { modelName: 'empty', rules: [{ targetModels: [{ modelServerName: 'empty', weight: 100 }] }] });
    await h.putRoute('ghost', { modelName: 'ghost', rules: [{ targetModels: [{ modelServerName: 'no-such-server', weight: 100 }] }] });
    const ep = await h.putEndpoint('ok', 'ok-0', 'aggregated', sim);
    h.decide = (r) =>
      r.modelServer === 'ok'
        ? { id: r.id, ok: true, mode: 'aggregated', attempts: [{ endpoint: ep }], encoders: [] }
        : {
            id: r.id,
            ok: false,
            code: 'SCHED_NO_CANDIDATES',
            message: 'no ready endpoint for default/empty',
          };
    await h.waitForModel('ghost');
  });
  afterAll(async () => {
    await h?.close();
  });

  it.each([
    ['invalid JSON', '{"model": "ok", ', 400, 'GATEWAY_BAD_REQUEST', null],
    ['a body that is not an object', '[1,2]', 400, 'GATEWAY_BAD_REQUEST', null],
    ['a missing model', JSON.stringify({ messages: [{ role: 'user', content: 'x' }] }), 400, 'GATEWAY_BAD_REQUEST', 'model'],
    [
      'a non-boolean stream',
      JSON.stringify({ model: 'ok', stream: 'yes', messages: [{ role: 'user', content: 'x' }] }),
      400,
      'GATEWAY_BAD_REQUEST',
      'stream',
    ],
    ['missing messages', JSON.stringify({ model: 'ok' }), 400, 'GATEWAY_BAD_REQUEST', 'messages'],
    [
      'a negative max_tokens',
      JSON.stringify({ model: 'ok', max_tokens: -1, messages: [{ role: 'user', content: 'x' }] }),
      400,
      'GATEWAY_BAD_REQUEST',
      'max_tokens',
    ],
    ['an unknown model', ok('nope'), 404, 'GATEWAY_MODEL_NOT_FOUND', 'model'],
    ['a route to a missing ModelServer', ok('ghost'), 404, 'GATEWAY_MODEL_NOT_FOUND', 'model'],
    ['no endpoint for the ModelServer', ok('empty'), 503, 'SCHED_NO_CANDIDATES', null],
  ])('answers %s with its status and an OpenAI error body', async (_name, body, status, code, param) => {
    const res = await post(h, body);
    expect(res.status).toBe(status);
    expect(res.body).toEqual({ error: { message: expect.any(String), type: expect.any(String), param, code } });
    expect(res.headers.get('x-request-id')).toEqual(expect.any(String));
  });

  it('answers 413 for a body over the limit', async () => {
    const res = await post(h, JSON.stringify({ model: 'ok', messages: [{ role: 'user', content: 'x'.repeat(5000) }] }));
    expect(res.status).toBe(413);
    expect(res.body.error).toMatchObject({ code: 'GATEWAY_BODY_TOO_LARGE', type: 'invalid_request_error' });
  });

  it('answers unknown paths with an OpenAI-shaped 404', async () => {
    const res = await fetch(`${h.gateway.url}/nowhere`);
    expect(res.status).toBe(404);
    expect(((await res.json()) as OpenAiErrorBody).error.type).toBe('not_found_error');
  });

  it('lets an admission hook reject with 401, and with 429 plus Retry-After (counted as a rate-limit reject)', async () => {
    const denied = await post(h, ok(), { 'x-test': 'deny' });
    expect(denied.status).toBe(401);
    expect(denied.body.error).toMatchObject({ code: 'GATEWAY_UNAUTHORIZED', type: 'authentication_error' });
    const limited = await post(h, ok(), { 'x-test': 'limit' });
    expect(limited.status).toBe(429);
    expect(limited.headers.get('retry-after')).toBe('7');
    expect(limited.body.error.type).toBe('rate_limit_error');
    const metrics = await (await fetch(`http://127.0.0.1:${h.gateway.metricsPort}/metrics`)).text();
    expect(metrics).toContain('kthena_router_rate_limit_exceeded_total{model="ok",limit_type="input",path="/v1/chat/completions"} 1');
  });

  it('calls the hooks in lifecycle order, adds stage-span headers to legs and ends with the usage', async () => {
    order.length = 0;
    sim.clearRequests();
    const res = await fetch(`${h.gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-request-id': 'hooked', 'x-test': 'queue' },
      body: ok(),
    });
    expect(res.status).toBe(200);
    await res.text();
    await waitFor(() => ended.some((e) => e.req.id === 'hooked'), { what: 'onEnd' });
    expect(order).toEqual([
      'request:hooked',
      'admit:hooked',
      'routed:default/ok',
      'scheduled:false',
      'stage:aggregated',
      'first-token',
      'stage-end:true',
      'end:200',
    ]);
    expect(inferenceRequests(sim)[0]?.headers['x-span']).toBe('span-1/aggregated');
    const end = ended.find((e) => e.req.id === 'hooked');
    expect(end?.outcome).toMatchObject({ status: 200, usage: { completionTokens: 2, promptTokens: expect.any(Number) } });
    expect(end?.req.inputTokens).toBeGreaterThan(0);
  });

  it('serves /healthz and /readyz on both ports and Prometheus metrics with Kthena names and stage histograms', async () => {
    expect((await fetch(`${h.gateway.url}/healthz`)).status).toBe(200);
    expect((await fetch(`${h.gateway.url}/readyz`)).status).toBe(200);
    expect((await fetch(`http://127.0.0.1:${h.gateway.metricsPort}/readyz`)).status).toBe(200);
    const metrics = await (await fetch(`http://127.0.0.1:${h.gateway.metricsPort}/metrics`)).text();
    for (const name of [
      'kthena_router_requests_total',
      'kthena_router_request_duration_seconds',
      'kthena_router_tokens_total',
      'kthena_router_active_requests',
      'triad_gateway_stage_duration_seconds',
      'triad_gateway_schedule_duration_seconds',
    ]) {
      expect(metrics).toContain(`# TYPE ${name}`);
    }
    expect(metrics).toMatch(/kthena_router_requests_total\{model="unknown",path="\/v1\/chat\/completions",status_code="404"/);
    // Bodies that do not parse are counted too.
    expect(metrics).toContain(
      'kthena_router_requests_total{model="unknown",path="/v1/chat/completions",status_code="400",error_type="GATEWAY_BAD_REQUEST"',
    );
    expect(metrics).toMatch(
      new RegExp(
        String.raw`kthena_router_tokens_total\{model="ok",path="/v1/chat/completions",token_type="output",` +
          String.raw`model_route="default/ok",model_server="default/ok"\} [1-9]`,
      ),
    );
    // Closed label sets read 0 before anything happened, so rules and dashboards over them have data.
    for (const reason of ['timeout', 'unavailable', 'invalid-reply', 'backoff']) {
      expect(metrics).toMatch(new RegExp(`^triad_gateway_local_decisions_total\\{reason="${reason}"\\} \\d+$`, 'm'));
    }
    expect(metrics).toContain('triad_gateway_ec_handoff_failures_total{reason="invalid_encoder_answer"} 0');
    expect(metrics).toMatch(/^triad_gateway_upstream_legs_total\{model_server="default\/ok",stage="aggregated",outcome="error"\} 0$/m);
    expect(metrics).toMatch(/^triad_nats_connected 1$/m);
  });
});
