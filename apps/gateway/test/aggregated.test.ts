import OpenAI from 'openai';
import { waitFor } from '@triad/testing';
import type { SimEngineHandle } from '@triad/engine-sim';
import { accessLines, inferenceRequests, startHarness, type Harness } from './support/harness';

const MODEL = 'Qwen/Qwen2.5-0.5B';

describe('gateway, aggregated ModelServer behind a vLLM engine-sim', () => {
  let h: Harness;
  let sim: SimEngineHandle;
  let direct: SimEngineHandle;

  beforeAll(async () => {
    h = await startHarness();
    sim = await h.startSim({ engine: 'vllm', role: 'both', host: '127.0.0.1', model: MODEL, loraAdapters: ['sql-lora'] });
    direct = await h.startSim({ engine: 'vllm', role: 'both', host: '127.0.0.1', model: MODEL });
    await h.putServer('agg', {
      model: MODEL,
      inferenceEngine: 'vLLM',
      workloadSelector: { matchLabels: { app: 'agg' } },
      workloadPort: { port: sim.port, protocol: 'http' },
    });
    await h.putRoute('chat', {
      modelName: 'chat',
      loraAdapters: ['sql-lora'],
      rules: [{ targetModels: [{ modelServerName: 'agg', weight: 100 }] }],
    });
    const ep = await h.putEndpoint('agg', 'agg-0', 'aggregated', sim);
    h.decide = (r) => ({ id: r.id, ok: true, mode: 'aggregated', attempts: [{ endpoint: ep }], encoders: [] });
    await h.waitForModel('chat');
  });
  afterAll(async () => {
    await h?.close();
  });

  it('serves chat through the official openai client, non-stream, with the model rewritten to the ModelServer model', async () => {
    const client = new OpenAI({ baseURL: `${h.gateway.url}/v1`, apiKey: 'test' });
    sim.clearRequests();
    const res = await client.chat.completions.create({
      model: 'chat',
      messages: [{ role: 'user', content: 'hello there' }],
      max_tokens: 8,
    });
    expect(res.object).toBe('chat.completion');
    expect(res.choices[0]?.message.content).toEqual(expect.any(String));
    expect(res.usage?.completion_tokens).toBe(8);
    const sent = inferenceRequests(sim);
    expect(sent).toHaveLength(1);
    expect((sent[0]?.body as { model: string }).model).toBe(MODEL);
    expect((sent[0]?.body as Record<string, unknown>)['stream_options']).toBeUndefined();
  });

  it('streams chat through the openai client and suppresses the usage chunk it injected', async () => {
    const client = new OpenAI({ baseURL: `${h.gateway.url}/v1`, apiKey: 'test' });
    sim.clearRequests();
    const stream = await client.chat.completions.create({
      model: 'chat',
      messages: [{ role: 'user', content: 'stream please' }],
      max_tokens: 5,
      stream: true,
    });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks.length).toBeGreaterThan(2);
    expect(chunks.every((c) => c.choices.length > 0)).toBe(true);
    expect(chunks.some((c) => c.usage)).toBe(false);
    const body = inferenceRequests(sim)[0]?.body as Record<string, unknown>;
    expect(body['stream_options']).toEqual({ include_usage: true });
    await waitFor(() => accessLines(h).some((l) => l['stream'] === true && l['output_tokens'] === 5), {
      what: 'access log with counted tokens',
    });
  });

  it('passes the usage chunk through when the client asked for it', async () => {
    const client = new OpenAI({ baseURL: `${h.gateway.url}/v1`, apiKey: 'test' });
    const stream = await client.chat.completions.create({
      model: 'chat',
      messages: [{ role: 'user', content: 'with usage' }],
      max_tokens: 4,
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    const last = chunks[chunks.length - 1];
    expect(last?.choices).toEqual([]);
    expect(last?.usage?.completion_tokens).toBe(4);
  });

  it('relays SSE bytes exactly as the engine framed them', async () => {
    const body = JSON.stringify({
      model: MODEL,
      prompt: 'byte exact',
      max_tokens: 6,
      stream: true,
      stream_options: { include_usage: true },
      seed: 7,
    });
    const viaDirect = await (
      await fetch(`${direct.url}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-request-id': 'same-id' },
        body,
      })
    ).text();
    const viaGateway = await fetch(`${h.gateway.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-request-id': 'same-id' },
      body: body.replace(MODEL, 'chat'),
    });
    expect(viaGateway.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(viaGateway.headers.get('x-request-id')).toBe('same-id');
    const text = await viaGateway.text();
    // `created` timestamps may differ by a second between the two engines; everything else is identical.
    const norm = (s: string) => s.replace(/"created":\d+/g, '"created":0');
    expect(norm(text)).toBe(norm(viaDirect));
    expect(text.endsWith('data: [DONE]\n\n')).toBe(true);
  });

  it('serves /v1/completions too', async () => {
    const res = await fetch(`${h.gateway.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'chat', prompt: 'plain', max_tokens: 2 }),
    });
    expect(res.status).toBe(200);
    const json = (await res.json()) as { object: string; usage: { completion_tokens: number } };
    expect(json.object).toBe('text_completion');
    expect(json.usage.completion_tokens).toBe(2);
  });

  it('proxies other /v1 POST paths with a JSON model on the aggregated path (an engine 404 as a not-found of the path)', async () => {
    sim.clearRequests();
    const res = await fetch(`${h.gateway.url}/v1/embeddings`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'chat', input: 'embed me' }),
    });
    const sent = inferenceRequests(sim);
    expect(sent.map((r) => [r.path, (r.body as { model: string }).model])).toEqual([['/v1/embeddings', MODEL]]);
    // A generative vLLM has no embeddings route: its 404 is a not-found naming the path and the model.
    expect(res.status).toBe(404);
    expect(((await res.json()) as { error: { message: string; code: string } }).error).toMatchObject({
      code: 'GATEWAY_PATH_NOT_FOUND',
      message: expect.stringMatching(/^POST \/v1\/embeddings is not served by the engines of model 'chat'/),
    });
  });

  it('keeps the model of a LoRA match instead of rewriting it', async () => {
    sim.clearRequests();
    const res = await fetch(`${h.gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'sql-lora', messages: [{ role: 'user', content: 'select' }], max_tokens: 2 }),
    });
    expect(res.status).toBe(200);
    expect((inferenceRequests(sim)[0]?.body as { model: string }).model).toBe('sql-lora');
  });

  it('lists ModelRoute names on /v1/models and writes an access log line per request', async () => {
    const res = await fetch(`${h.gateway.url}/v1/models`);
    expect(await res.json()).toEqual({
      object: 'list',
      data: [
        { id: 'chat', object: 'model', created: 0, owned_by: 'triad' },
        { id: 'sql-lora', object: 'model', created: 0, owned_by: 'triad' },
      ],
    });
    const line = accessLines(h).find((l) => l['path'] === '/v1/chat/completions');
    expect(line).toMatchObject({
      method: 'POST',
      status_code: 200,
      model_name: 'chat',
      model_route: 'default/chat',
      model_server: 'default/agg',
      upstream_model: MODEL,
      mode: 'aggregated',
      endpoints: { aggregated: ['agg-0'] },
    });
    expect(line?.['timings_ms']).toEqual(
      expect.objectContaining({
        total: expect.any(Number),
        schedule: expect.any(Number),
        decode: expect.any(Number),
      }),
    );
  });

  it('answers GET /v1/models/{id} for models.retrieve, slashes in ids included, and an OpenAI-shaped 404 otherwise', async () => {
    const client = new OpenAI({ baseURL: `${h.gateway.url}/v1`, apiKey: 'test' });
    expect(await client.models.retrieve('chat')).toEqual({ id: 'chat', object: 'model', created: 0, owned_by: 'triad' });
    expect((await client.models.retrieve('sql-lora')).id).toBe('sql-lora');
    await h.putRoute('org-chat', { modelName: 'org/chat-v2', rules: [{ targetModels: [{ modelServerName: 'agg', weight: 100 }] }] });
    await h.waitForModel('org/chat-v2');
    // The SDK percent-encodes the slash; curl users send it raw.
    expect((await client.models.retrieve('org/chat-v2')).id).toBe('org/chat-v2');
    const raw = await fetch(`${h.gateway.url}/v1/models/org/chat-v2`);
    expect(raw.status).toBe(200);
    expect(((await raw.json()) as { id: string }).id).toBe('org/chat-v2');

    const missing = await fetch(`${h.gateway.url}/v1/models/no-such-model`);
    expect(missing.status).toBe(404);
    expect(await missing.json()).toEqual({
      error: {
        message: "The model 'no-such-model' does not exist",
        type: 'not_found_error',
        param: 'model',
        code: 'GATEWAY_MODEL_NOT_FOUND',
      },
    });
    await expect(client.models.retrieve('no-such-model')).rejects.toMatchObject({ status: 404 });
  });
});
