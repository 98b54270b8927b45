import OpenAI from 'openai';
import { Buckets, OutlierRecordSchema, endpointKey, outlierKey } from '@triad/bus';
import type { SimEngineHandle } from '@triad/engine-sim';
import { waitFor } from '@triad/testing';
import { accessLines, inferenceRequests, startHarness, NS, type Harness } from './support/harness';

const GEN = 'sim-gen';
const EMBED = 'sim-embed';
const SG = 'sim-sglang';

interface ErrorBody {
  error: { message: string; type: string; param: string | null; code: string };
}

describe('gateway: the OpenAI surface at its edges (embeddings, responses, unknown paths and roles)', () => {
  let h: Harness;
  let gen: SimEngineHandle;
  let gen2: SimEngineHandle;
  let embed: SimEngineHandle;
  let sg: SimEngineHandle;
  let deadPort: number;

  beforeAll(async () => {
    // The gateway's own scheduler (in process) reads the shared outlier state, as the service does.
    h = await startHarness({ config: { scheduling: 'in-process' } });
    gen = await h.startSim({ engine: 'vllm', role: 'both', host: '127.0.35.1', model: GEN });
    gen2 = await h.startSim({ engine: 'vllm', role: 'both', host: '127.0.35.2', model: GEN });
    embed = await h.startSim({ engine: 'vllm', role: 'both', host: '127.0.35.3', model: EMBED, runner: 'pooling', embeddingSize: 8 });
    sg = await h.startSim({ engine: 'sglang', role: 'both', host: '127.0.35.4', model: SG });
    const gone = await h.startSim({ engine: 'vllm', role: 'both', host: '127.0.35.5', model: GEN });
    deadPort = gone.port;
    const server = (model: string, engine: 'vLLM' | 'SGLang', app: string) => ({
      model,
      inferenceEngine: engine,
      workloadSelector: { matchLabels: { app } },
      workloadPort: { port: 8000, protocol: 'http' as const },
      // One failure ejects: a 404 that counted would show at once.
      trafficPolicy: { outlierDetection: { consecutiveErrors: 1, baseEjectionTime: '60s' } },
    });
    await h.putServer('gen', server(GEN, 'vLLM', 'gen'));
    await h.putServer('embed', server(EMBED, 'vLLM', 'embed'));
    await h.putServer('sg', server(SG, 'SGLang', 'sg'));
    await h.putServer('dead', server(GEN, 'vLLM', 'dead'));
    // One model name for both: a rule sends embeddings to the embedding model's engines, the rest to the generative.
    await h.putRoute('assistant', {
      modelName: 'assistant',
      rules: [
        { name: 'embeddings', modelMatch: { uri: { exact: '/v1/embeddings' } }, targetModels: [{ modelServerName: 'embed', weight: 100 }] },
        { name: 'generation', targetModels: [{ modelServerName: 'gen', weight: 100 }] },
      ],
    });
    await h.putRoute('chat-only', { modelName: 'chat-only', rules: [{ targetModels: [{ modelServerName: 'gen', weight: 100 }] }] });
    await h.putRoute('sg', { modelName: 'sg', rules: [{ targetModels: [{ modelServerName: 'sg', weight: 100 }] }] });
    await h.putRoute('dead', { modelName: 'dead', rules: [{ targetModels: [{ modelServerName: 'dead', weight: 100 }] }] });
    await h.putEndpoint('gen', 'g0', 'aggregated', gen);
    await h.putEndpoint('gen', 'g1', 'aggregated', gen2);
    await h.putEndpoint('embed', 'e0', 'aggregated', embed);
    await h.putEndpoint('sg', 's0', 'aggregated', sg);
    await h.putEndpoint('dead', 'd0', 'aggregated', gone);
    await gone.close();
    await h.waitForModel('dead');
  });
  afterAll(async () => {
    await h?.close();
  });

  const client = () => new OpenAI({ baseURL: `${h.gateway.url}/v1`, apiKey: 'test', maxRetries: 0 });
  const send = (method: string, path: string, body?: unknown, id?: string) =>
    fetch(`${h.gateway.url}${path}`, {
      method,
      headers: { 'content-type': 'application/json', ...(id === undefined ? {} : { 'x-request-id': id }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  const errorOf = async (res: Response) => (await res.json()) as ErrorBody;
  const chat = (model: string, messages: unknown[], id?: string) =>
    send('POST', '/v1/chat/completions', { model, max_tokens: 2, messages }, id);
  const accessOf = async (id: string) => {
    await waitFor(() => accessLines(h).some((l) => l['request_id'] === id), { what: `the access line of ${id}` });
    return accessLines(h).find((l) => l['request_id'] === id)!;
  };
  /** Endpoint keys and engine addresses a client must never read. */
  const internals = () => [
    `${NS}.gen.`,
    `${NS}.embed.`,
    `${NS}.sg.`,
    `${NS}.dead.`,
    '127.0.35.',
    ...[gen, gen2, embed, sg].map((s) => `:${s.port}`),
    `:${deadPort}`,
  ];
  const expectNoInternals = (text: string) => {
    for (const secret of internals()) expect(text).not.toContain(secret);
  };

  it('routes embeddings by the rule for their path to the embedding engines, through the openai client', async () => {
    const before = inferenceRequests(gen).length + inferenceRequests(gen2).length;
    const res = await client().embeddings.create({ model: 'assistant', input: ['first text', 'second text'] });
    expect(res.object).toBe('list');
    expect(res.data.map((d) => [d.index, d.embedding.length])).toEqual([
      [0, 8],
      [1, 8],
    ]);
    // The SDK asks for base64 and decodes it: unit vectors arrive as numbers.
    expect(Math.hypot(...res.data[0].embedding)).toBeCloseTo(1, 5);
    expect(res.usage.prompt_tokens).toBeGreaterThan(0);
    const sent = inferenceRequests(embed).at(-1);
    expect(sent?.path).toBe('/v1/embeddings');
    expect((sent?.body as Record<string, unknown>)['model']).toBe(EMBED);
    expect(inferenceRequests(gen).length + inferenceRequests(gen2).length).toBe(before);
  });

  it('serves the Responses API from the generative engines, stream and not, through the openai client', async () => {
    const oai = client();
    const res = await oai.responses.create({ model: 'assistant', input: 'Say something', max_output_tokens: 5 });
    expect(res.object).toBe('response');
    expect(res.output_text.match(/ [a-z]+/g)).toHaveLength(5);
    expect(res.usage?.output_tokens).toBe(5);
    const stream = await oai.responses.create({ model: 'assistant', input: 'Stream something', max_output_tokens: 4, stream: true });
    const types: string[] = [];
    let deltas = '';
    let completed = '';
    for await (const event of stream) {
      types.push(event.type);
      if (event.type === 'response.output_text.delta') deltas += event.delta;
      if (event.type === 'response.completed') {
        const item = event.response.output[0];
        completed = item?.type === 'message' && item.content[0]?.type === 'output_text' ? item.content[0].text : '';
      }
    }
    expect(types[0]).toBe('response.created');
    expect(types.at(-1)).toBe('response.completed');
    expect(types.filter((t) => t === 'response.output_text.delta')).toHaveLength(4);
    expect(completed).toBe(deltas);
    const sent = [...inferenceRequests(gen), ...inferenceRequests(gen2)].filter((r) => r.path === '/v1/responses');
    expect(sent).toHaveLength(2);
    expect(sent.every((r) => (r.body as Record<string, unknown>)['model'] === GEN)).toBe(true);
    // Usage is read from the Responses shape (input/output tokens), streamed or not: token metrics and rate limits.
    await waitFor(() => accessLines(h).filter((l) => l['path'] === '/v1/responses').length === 2, { what: 'two access lines' });
    expect(
      accessLines(h)
        .filter((l) => l['path'] === '/v1/responses')
        .map((l) => l['output_tokens']),
    ).toEqual([5, 4]);
  });

  it('answers a path the engines do not serve with a not-found naming the path and model, no endpoint, no ejection', async () => {
    const outliers = await h.bus.kv(Buckets.outliers, OutlierRecordSchema);
    for (const [path, body] of [
      ['/v1/embeddings', { model: 'chat-only', input: 'x' }],
      ['/v1/foo', { model: 'chat-only', input: 'x' }],
      ['/v1/embeddings', { model: 'chat-only', input: 'again' }],
    ] as const) {
      const res = await send('POST', path, body);
      expect(res.status).toBe(404);
      const text = await res.text();
      expectNoInternals(text);
      expect(JSON.parse(text)).toEqual({
        error: {
          message: expect.stringMatching(
            new RegExp(`^POST ${path} is not served by the engines of model 'chat-only': they have no route for it`),
          ),
          type: 'not_found_error',
          param: null,
          code: 'GATEWAY_PATH_NOT_FOUND',
        },
      });
    }
    // The engines' 404 judges the request, not the engines: no request ejected its pod (an ejection is recorded on the
    // request that caused it), none is shared, and chat still goes through. The log keeps where it happened.
    const notServed = () =>
      accessLines(h).filter((l) => l['path'] === '/v1/foo' || (l['path'] === '/v1/embeddings' && l['status_code'] === 404));
    await waitFor(() => notServed().length === 3, { what: 'three access lines' });
    const logged = notServed();
    expect(logged.filter((l) => l['outliers'] !== undefined)).toEqual([]);
    expect(await outliers.keys()).toEqual([]);
    expect(JSON.stringify(logged.find((l) => l['path'] === '/v1/foo')?.['error'])).toMatch(
      /aggregated on default\.gen\.g[01] answered HTTP 404/,
    );
    expect((await chat('chat-only', [{ role: 'user', content: 'still there?' }])).status).toBe(200);
  });

  it("keeps an engine's own 404 (a response id it does not know) with its message, without the endpoint", async () => {
    const res = await send('POST', '/v1/responses', { model: 'chat-only', input: 'x', previous_response_id: 'resp_unknown' });
    expect(res.status).toBe(404);
    const text = await res.text();
    expectNoInternals(text);
    expect(JSON.parse(text)).toEqual({
      error: {
        message: "aggregated failed with HTTP 404: Response with id 'resp_unknown' not found.",
        type: 'not_found_error',
        param: null,
        code: 'GATEWAY_UPSTREAM_ERROR',
      },
    });
  });

  it('gives paths the gateway has no route for a not-found of their own, whatever the method', async () => {
    for (const [method, path] of [
      ['GET', '/v2/x'],
      ['GET', '/v1/foo'],
      ['PUT', '/v1/chat/completions'],
      ['DELETE', '/generate'],
    ]) {
      const res = await send(method, path);
      expect(res.status).toBe(404);
      expect(await errorOf(res)).toEqual({
        error: {
          message: expect.stringContaining(`There is no route for ${method} ${path}. The gateway serves POST /v1/*`),
          type: 'not_found_error',
          param: null,
          code: 'GATEWAY_PATH_NOT_FOUND',
        },
      });
    }
    // An unknown model on a known path is still the model's not-found.
    expect((await errorOf(await chat('nope', [{ role: 'user', content: 'x' }]))).error.code).toBe('GATEWAY_MODEL_NOT_FOUND');
  });

  it('refuses a role vLLM engines would hand to the chat template, before anything is scheduled', async () => {
    const standard = ['system', 'developer', 'user', 'assistant', 'tool', 'function'].map((role) => ({ role, content: 'x' }));
    expect((await chat('chat-only', standard, 'roles-ok')).status).toBe(200);
    expect((await accessOf('roles-ok'))['decided_locally']).toBe(true);
    const served = inferenceRequests(gen).length + inferenceRequests(gen2).length;
    for (const role of ['narrator', 'System']) {
      const messages = [
        { role: 'user', content: 'x' },
        { role, content: 'y' },
      ];
      const res = await chat('chat-only', messages, `roles-${role}`);
      expect(res.status).toBe(400);
      expect(await errorOf(res)).toEqual({
        error: {
          message:
            `Invalid value for messages[1].role: '${role}'. The vLLM engines of model 'chat-only' accept 'system', 'developer', ` +
            "'user', 'assistant', 'tool', 'function'",
          type: 'invalid_request_error',
          param: 'messages.[1].role',
          code: 'GATEWAY_BAD_REQUEST',
        },
      });
      expect(await accessOf(`roles-${role}`)).toMatchObject({ status_code: 400, decided_locally: false, endpoints: {} });
    }
    expect(inferenceRequests(gen).length + inferenceRequests(gen2).length).toBe(served);
  });

  it("refuses roles as SGLang's validation does: generic roles in any case, 'user' exactly", async () => {
    for (const role of ['System', 'DEVELOPER', 'latest_reminder', 'function', 'user']) {
      expect((await chat('sg', [{ role, content: 'x' }])).status).toBe(200);
    }
    for (const role of ['User', 'narrator']) {
      const res = await chat('sg', [{ role, content: 'x' }]);
      expect(res.status).toBe(400);
      expect((await errorOf(res)).error).toMatchObject({
        param: 'messages.[0].role',
        message: expect.stringContaining(`'${role}'. The SGLang engines of model 'sg' accept 'system', 'assistant', 'tool'`),
      });
    }
  });

  it('never names an endpoint or address when an engine cannot be reached; the log still does', async () => {
    const res = await chat('dead', [{ role: 'user', content: 'anyone?' }]);
    expect(res.status).toBe(502);
    const text = await res.text();
    expectNoInternals(text);
    expect((JSON.parse(text) as ErrorBody).error).toMatchObject({
      code: 'GATEWAY_UPSTREAM_CONNECT',
      message: 'aggregated failed: the connection was refused',
    });
    await waitFor(
      () =>
        accessLines(h).some((l) => JSON.stringify(l['error'] ?? '').includes(`aggregated on ${NS}.dead.d0 failed: connect ECONNREFUSED`)),
      {
        what: 'the access log naming the endpoint',
      },
    );
  });

  it('still ejects on a real failure (the detector was live while the 404s went by)', async () => {
    const outliers = await h.bus.kv(Buckets.outliers, OutlierRecordSchema);
    gen.setFault({ mode: 'error500' });
    gen2.setFault({ mode: 'error500' });
    try {
      expect((await chat('chat-only', [{ role: 'user', content: 'fail once' }])).status).toBe(502);
      const pods = ['g0', 'g1'].map((pod) => outlierKey(endpointKey(NS, 'gen', pod), 'aggregated'));
      await waitFor(async () => (await outliers.keys()).some((k) => pods.includes(k)), { what: 'an outlier record after a 5xx' });
    } finally {
      gen.setFault({ mode: 'ok' });
      gen2.setFault({ mode: 'ok' });
    }
  });
});
