import type { SimEngineHandle } from '@triad/engine-sim';
import { post, SimFleet } from './helpers';

interface NamedEvent {
  readonly event: string;
  readonly data: Record<string, unknown>;
}

/** Splits a Responses API stream into its named events; asserts each is `event: <type>\ndata: <json>\n\n`. */
function namedEvents(text: string): NamedEvent[] {
  expect(text.endsWith('\n\n')).toBe(true);
  return text
    .slice(0, -2)
    .split('\n\n')
    .map((block) => {
      const m = /^event: (\S+)\ndata: (.*)$/s.exec(block);
      if (m === null) throw new Error(`bad event ${JSON.stringify(block)}`);
      return { event: m[1], data: JSON.parse(m[2]) as Record<string, unknown> };
    });
}

describe('vLLM simulator: the Responses API (generate runner)', () => {
  const fleet = new SimFleet();
  let sim: SimEngineHandle;

  beforeAll(async () => {
    sim = await fleet.start({ engine: 'vllm', role: 'both', maxModelLen: 4096 });
  });
  afterAll(() => fleet.closeAll());

  it('answers a response object with one assistant message and Responses usage', async () => {
    const res = await post(`${sim.url}/v1/responses`, {
      model: 'sim-model',
      input: 'Say hello',
      instructions: 'Be brief',
      max_output_tokens: 6,
    });
    expect(res.status).toBe(200);
    const body = res.json<Record<string, unknown>>();
    expect(body).toMatchObject({
      object: 'response',
      model: 'sim-model',
      status: 'incomplete',
      incomplete_details: { reason: 'max_output_tokens' },
      instructions: 'Be brief',
      max_output_tokens: 6,
      output: [{ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', annotations: [] }] }],
    });
    expect(body['id']).toMatch(/^resp_[0-9a-f]{32}$/);
    const text = (body['output'] as { content: { text: string }[] }[])[0].content[0].text;
    expect(text.match(/ [a-z]+/g)).toHaveLength(6);
    const usage = body['usage'] as { input_tokens: number; output_tokens: number; total_tokens: number };
    expect(usage.output_tokens).toBe(6);
    expect(usage.total_tokens).toBe(usage.input_tokens + 6);
  });

  it('streams named events numbered from 0, deltas that add up to the completed response', async () => {
    const res = await post(`${sim.url}/v1/responses`, {
      model: 'sim-model',
      input: [{ role: 'user', content: 'Hi' }],
      stream: true,
      max_output_tokens: 3,
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const events = namedEvents(res.text);
    expect(events.map((e) => e.event)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.delta',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.completed',
    ]);
    expect(events.map((e) => e.data['sequence_number'])).toEqual(events.map((_, i) => i));
    expect(events.every((e) => e.data['type'] === e.event)).toBe(true);
    const deltas = events
      .filter((e) => e.event === 'response.output_text.delta')
      .map((e) => e.data['delta'])
      .join('');
    const done = events.at(-1)!.data['response'] as { output: { content: { text: string }[] }[]; usage: { output_tokens: number } };
    expect(done.output[0].content[0].text).toBe(deltas);
    expect(done.usage.output_tokens).toBe(3);
    expect((events[0].data['response'] as { status: string; usage: unknown }).status).toBe('in_progress');
  });

  it("keeps vLLM's own refusals: background without the store (400), an unknown previous response (404)", async () => {
    const background = await post(`${sim.url}/v1/responses`, { model: 'sim-model', input: 'x', background: true });
    expect(background.status).toBe(400);
    expect(background.json<{ error: { param: string } }>().error.param).toBe('background');
    const previous = await post(`${sim.url}/v1/responses`, { model: 'sim-model', input: 'x', previous_response_id: 'resp_gone' });
    expect(previous.status).toBe(404);
    expect(previous.json<{ error: { message: string } }>().error.message).toBe("Response with id 'resp_gone' not found.");
  });

  it("has no embeddings: FastAPI's 404 for a path the generate runner does not register", async () => {
    const res = await post(`${sim.url}/v1/embeddings`, { model: 'sim-model', input: 'x' });
    expect(res.status).toBe(404);
    expect(res.json()).toEqual({ detail: 'Not Found' });
  });
});

describe('vLLM simulator: /v1/embeddings (pooling runner)', () => {
  const fleet = new SimFleet();
  let sim: SimEngineHandle;

  beforeAll(async () => {
    sim = await fleet.start({ engine: 'vllm', role: 'both', model: 'sim-embed', runner: 'pooling', embeddingSize: 8 });
  });
  afterAll(() => fleet.closeAll());

  it('embeds each input as a unit vector, the same text the same vector, with prompt-only usage', async () => {
    const res = await post(`${sim.url}/v1/embeddings`, { model: 'sim-embed', input: ['alpha', 'beta', 'alpha'] });
    expect(res.status).toBe(200);
    const body = res.json<{
      id: string;
      object: string;
      data: { index: number; object: string; embedding: number[] }[];
      usage: Record<string, unknown>;
    }>();
    expect(body.id).toMatch(/^embd-/);
    expect(body.object).toBe('list');
    expect(body.data.map((d) => [d.index, d.object, d.embedding.length])).toEqual([
      [0, 'embedding', 8],
      [1, 'embedding', 8],
      [2, 'embedding', 8],
    ]);
    const norm = Math.hypot(...body.data[0].embedding);
    expect(norm).toBeCloseTo(1, 5);
    expect(body.data[2].embedding).toEqual(body.data[0].embedding);
    expect(body.data[1].embedding).not.toEqual(body.data[0].embedding);
    expect(body.usage).toMatchObject({ completion_tokens: 0, prompt_tokens_details: null });
    expect(body.usage['total_tokens']).toBe(body.usage['prompt_tokens']);
  });

  it('encodes base64 as little-endian float32, the float vector bit for bit', async () => {
    const floats = await post(`${sim.url}/v1/embeddings`, { model: 'sim-embed', input: 'gamma' });
    const base64 = await post(`${sim.url}/v1/embeddings`, { model: 'sim-embed', input: 'gamma', encoding_format: 'base64' });
    const encoded = base64.json<{ data: { embedding: string }[] }>().data[0].embedding;
    const bytes = Buffer.from(encoded, 'base64');
    const decoded = Array.from({ length: bytes.length / 4 }, (_, i) => bytes.readFloatLE(i * 4));
    expect(decoded).toEqual(floats.json<{ data: { embedding: number[] }[] }>().data[0].embedding);
  });

  it('refuses dimensions as vLLM does for a model without Matryoshka support, and has no chat', async () => {
    const res = await post(`${sim.url}/v1/embeddings`, { model: 'sim-embed', input: 'x', dimensions: 4 });
    expect(res.status).toBe(400);
    expect(res.json<{ error: { message: string } }>().error.message).toMatch(/does not support matryoshka representation/);
    const chat = await post(`${sim.url}/v1/chat/completions`, { model: 'sim-embed', messages: [{ role: 'user', content: 'x' }] });
    expect(chat.status).toBe(404);
    expect(chat.json()).toEqual({ detail: 'Not Found' });
  });
});
