import type { SimEngineHandle } from '@triad/engine-sim';
import { CHAT, get, post, SimFleet, sseEvents } from './helpers';

/** The output tokens of a non-streamed answer (each simulated token is one word with a leading space). */
function tokensOf(content: string): string[] {
  return content.match(/ [a-z]+/g) ?? [];
}

describe('vLLM simulator: OpenAI surface (aggregated role)', () => {
  const fleet = new SimFleet();
  let sim: SimEngineHandle;
  let chatUrl: string;

  beforeAll(async () => {
    sim = await fleet.start({ engine: 'vllm', role: 'both', host: '127.0.0.2', loraAdapters: ['sql-lora'], maxModelLen: 4096 });
    chatUrl = `${sim.url}/v1/chat/completions`;
  });
  afterAll(() => fleet.closeAll());

  it('listens on the requested loopback address and answers /health with an empty 200', async () => {
    expect(sim.url).toMatch(/^http:\/\/127\.0\.0\.2:\d+$/);
    const res = await get(`${sim.url}/health`);
    expect(res.status).toBe(200);
    expect(res.text).toBe('');
  });

  it('answers a chat completion in vLLM shape, with usage, and echoes x-request-id in the id', async () => {
    const res = await post(chatUrl, { model: 'sim-model', messages: CHAT, max_tokens: 5 }, { 'x-request-id': 'req-42' });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-request-id')).toBe('req-42');
    const body = res.json<{ id: string; choices: { message: { content: string } }[]; usage: Record<string, unknown> }>();
    expect(body).toMatchObject({
      id: 'chatcmpl-req-42',
      object: 'chat.completion',
      model: 'sim-model',
      choices: [
        {
          index: 0,
          message: { role: 'assistant', reasoning_content: null, tool_calls: [] },
          logprobs: null,
          finish_reason: 'length',
          stop_reason: null,
        },
      ],
      prompt_logprobs: null,
      kv_transfer_params: null,
    });
    expect(tokensOf(body.choices[0].message.content)).toHaveLength(5);
    const {
      prompt_tokens: p,
      completion_tokens: c,
      total_tokens: t,
    } = body.usage as {
      prompt_tokens: number;
      completion_tokens: number;
      total_tokens: number;
    };
    expect(c).toBe(5);
    expect(t).toBe(p + c);
    expect(body.usage['prompt_tokens_details']).toBeNull();
  });

  it('is deterministic for a prompt and seed, and respects max_completion_tokens over max_tokens', async () => {
    const a = await post(chatUrl, { messages: CHAT, max_tokens: 8, seed: 7 });
    const b = await post(chatUrl, { messages: CHAT, max_tokens: 8, seed: 7 });
    const c = await post(chatUrl, { messages: CHAT, max_tokens: 8, seed: 8 });
    const content = (r: typeof a) => r.json<{ choices: { message: { content: string } }[] }>().choices[0].message.content;
    expect(content(a)).toBe(content(b));
    expect(content(a)).not.toBe(content(c));
    const d = await post(chatUrl, { messages: CHAT, max_tokens: 8, max_completion_tokens: 3 });
    expect(d.json<{ usage: { completion_tokens: number } }>().usage.completion_tokens).toBe(3);
  });

  it('refuses min_tokens above max_tokens with a 400, as vLLM SamplingParams does (a prefill leg cut to one token)', async () => {
    const refused = await post(chatUrl, { messages: CHAT, max_tokens: 1, min_tokens: 2 });
    expect(refused.status).toBe(400);
    expect(refused.text).toContain('min_tokens must be less than or equal to max_tokens=1, got 2.');
    const accepted = await post(chatUrl, { messages: CHAT, max_tokens: 2, min_tokens: 2 });
    expect(accepted.status).toBe(200);
  });

  it('stops on its own (finish_reason stop) when max_tokens is large', async () => {
    const res = await post(chatUrl, { messages: CHAT, max_tokens: 1000 });
    const body = res.json<{ choices: { finish_reason: string }[]; usage: { completion_tokens: number } }>();
    expect(body.choices[0].finish_reason).toBe('stop');
    expect(body.usage.completion_tokens).toBeGreaterThanOrEqual(64);
    expect(body.usage.completion_tokens).toBeLessThan(128);
  });

  it('streams chat SSE byte-for-byte as vLLM frames it (role chunk, content chunks, finish on the last, usage chunk, [DONE])', async () => {
    const plain = await post(chatUrl, { messages: CHAT, max_tokens: 4 });
    const tokens = tokensOf(plain.json<{ choices: { message: { content: string } }[] }>().choices[0].message.content);
    const promptTokens = plain.json<{ usage: { prompt_tokens: number } }>().usage.prompt_tokens;
    const res = await post(chatUrl, { messages: CHAT, max_tokens: 4, stream: true, stream_options: {} }, { 'x-request-id': 'sse-1' });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    const created = JSON.parse(sseEvents(res.text)[0]).created as number;
    const head = `{"id":"chatcmpl-sse-1","object":"chat.completion.chunk","created":${created},"model":"sim-model"`;
    const expected = [
      `${head},"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`,
      ...tokens.map(
        (t, i) =>
          `${head},"choices":[{"index":0,"delta":{"content":"${t}"},"logprobs":null,"finish_reason":${
            i === tokens.length - 1 ? '"length","stop_reason":null' : 'null'
          }}]}`,
      ),
      `${head},"choices":[],"usage":{"prompt_tokens":${promptTokens},"total_tokens":${promptTokens + 4},"completion_tokens":4}}`,
      '[DONE]',
    ]
      .map((e) => `data: ${e}\n\n`)
      .join('');
    expect(res.text).toBe(expected);
  });

  it.each([
    ['no stream_options', undefined, false],
    ['stream_options {} (vLLM defaults include_usage to true)', {}, true],
    ['include_usage false', { include_usage: false }, false],
  ])('chat stream usage chunk with %s', async (_name, streamOptions, expectUsage) => {
    const res = await post(chatUrl, {
      messages: CHAT,
      max_tokens: 2,
      stream: true,
      ...(streamOptions ? { stream_options: streamOptions } : {}),
    });
    const events = sseEvents(res.text);
    expect(events.at(-1)).toBe('[DONE]');
    const hasUsage = events.slice(0, -1).some((e) => (JSON.parse(e) as { usage?: unknown }).usage !== undefined);
    expect(hasUsage).toBe(expectUsage);
  });

  it('puts running usage in every chunk with continuous_usage_stats', async () => {
    const res = await post(chatUrl, {
      messages: CHAT,
      max_tokens: 3,
      stream: true,
      stream_options: { include_usage: true, continuous_usage_stats: true },
    });
    const chunks = sseEvents(res.text)
      .slice(0, -1)
      .map((e) => JSON.parse(e) as { usage: { completion_tokens: number } });
    expect(chunks.map((c) => c.usage.completion_tokens)).toEqual([0, 1, 2, 3, 3]);
  });

  it('streams completions with "usage":null on content chunks and finish on the last one', async () => {
    const res = await post(
      `${sim.url}/v1/completions`,
      { model: 'sim-model', prompt: 'Once upon a time', max_tokens: 3, stream: true },
      { 'x-request-id': 'c1' },
    );
    const events = sseEvents(res.text);
    expect(events).toHaveLength(4);
    const chunks = events.slice(0, 3).map((e) => JSON.parse(e) as Record<string, unknown>);
    for (const [i, c] of chunks.entries()) {
      expect(Object.keys(c)).toEqual(['id', 'object', 'created', 'model', 'choices', 'usage']);
      expect(c).toMatchObject({
        id: 'cmpl-c1',
        object: 'text_completion',
        usage: null,
        choices: [{ index: 0, logprobs: null, finish_reason: i === 2 ? 'length' : null, stop_reason: null }],
      });
    }
    expect(events[3]).toBe('[DONE]');
  });

  it('answers a non-streamed completion with the default max_tokens of 16', async () => {
    const res = await post(`${sim.url}/v1/completions`, { prompt: 'Once upon a time' });
    expect(res.json()).toMatchObject({
      object: 'text_completion',
      choices: [{ finish_reason: 'length', prompt_logprobs: null }],
      usage: { completion_tokens: 16 },
    });
  });

  it('lists the model and its LoRA adapters in /v1/models and accepts the adapter as model', async () => {
    const res = await get(`${sim.url}/v1/models`);
    const body = res.json<{
      object: string;
      data: { id: string; owned_by: string; parent: string | null; max_model_len: number | null }[];
    }>();
    expect(body.object).toBe('list');
    expect(body.data.map((m) => m.id)).toEqual(['sim-model', 'sql-lora']);
    expect(body.data[0]).toMatchObject({ object: 'model', owned_by: 'vllm', root: 'sim-model', parent: null, max_model_len: 4096 });
    expect(body.data[1]).toMatchObject({ parent: 'sim-model' });
    const lora = await post(chatUrl, { model: 'sql-lora', messages: CHAT, max_tokens: 1 });
    expect(lora.json()).toMatchObject({ model: 'sql-lora' });
  });

  it.each([
    ['invalid JSON', '{"messages": [', 400, 'BadRequestError'],
    ['a body that is not an object', '[1,2]', 400, 'BadRequestError'],
    ['missing messages', { model: 'sim-model' }, 400, 'BadRequestError'],
    ['a message without role', { messages: [{ content: 'x' }] }, 400, 'BadRequestError'],
    ['an unknown content part', { messages: [{ role: 'user', content: [{ type: 'hologram' }] }] }, 400, 'BadRequestError'],
    ['max_tokens 0', { messages: CHAT, max_tokens: 0 }, 400, 'BadRequestError'],
    ['max_tokens as text', { messages: CHAT, max_tokens: 'ten' }, 400, 'BadRequestError'],
    ['n = 2', { messages: CHAT, n: 2 }, 400, 'BadRequestError'],
    ['stream_options without stream', { messages: CHAT, stream_options: { include_usage: true } }, 400, 'BadRequestError'],
    ['a prompt beyond max_model_len', { messages: CHAT, max_tokens: 5000 }, 400, 'BadRequestError'],
    ['an unknown model', { model: 'gpt-9', messages: CHAT }, 404, 'NotFoundError'],
  ])('rejects %s with the vLLM error shape', async (_name, body, status, type) => {
    const res = await post(chatUrl, body);
    expect(res.status).toBe(status);
    const err = res.json<{ error: Record<string, unknown> }>();
    expect(Object.keys(err)).toEqual(['error']);
    expect(err.error).toMatchObject({ type, code: status });
    expect(typeof err.error['message']).toBe('string');
    expect(err.error).toHaveProperty('param');
  });

  it('answers unknown paths and methods like FastAPI', async () => {
    expect(await get(`${sim.url}/nope`)).toMatchObject({ status: 404, text: '{"detail":"Not Found"}' });
    expect(await get(chatUrl)).toMatchObject({ status: 405, text: '{"detail":"Method Not Allowed"}' });
    expect(await get(`${sim.url}/admin/log`)).toMatchObject({ status: 404 });
  });

  it('logs every request with its headers (traceparent included) and parsed body', async () => {
    sim.clearRequests();
    const traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    await post(chatUrl, { messages: CHAT, max_tokens: 1 }, { traceparent });
    const log = sim.requests();
    expect(log).toHaveLength(1);
    expect(log[0]).toMatchObject({
      method: 'POST',
      path: '/v1/chat/completions',
      headers: { traceparent },
      body: { messages: CHAT, max_tokens: 1 },
    });
    expect(typeof log[0].at).toBe('number');
    sim.clearRequests();
    expect(sim.requests()).toHaveLength(0);
  });
});

describe('vLLM simulator: request log off (requestLogLimit 0)', () => {
  const fleet = new SimFleet();
  afterAll(() => fleet.closeAll());

  it('answers as usual and keeps no requests', async () => {
    const sim = await fleet.start({ engine: 'vllm', role: 'both', host: '127.0.0.2', requestLogLimit: 0 });
    const res = await post(`${sim.url}/v1/chat/completions`, { messages: CHAT, max_tokens: 2 });
    expect(res.json()).toMatchObject({ usage: { completion_tokens: 2 } });
    expect(sim.requests()).toHaveLength(0);
    expect(sim.counters()['requests']).toBe(1);
  });
});
