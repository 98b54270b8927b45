import type { EngineKind, SimEngineHandle } from '../src/options';
import { CHAT, post, rawPost, SimFleet, sseEvents } from './helpers';

const engines: EngineKind[] = ['vllm', 'sglang'];

interface Chunk {
  choices: { delta?: { content?: string | null; role?: string | null }; text?: string; finish_reason: string | null }[];
  usage?: { prompt_tokens: number; completion_tokens: number } | null;
}

/** Token texts of a stream, one entry per chunk that carries text. */
function streamedTokens(body: string): string[] {
  const out: string[] = [];
  for (const data of body.split('\n\n')) {
    if (!data.startsWith('data: {')) continue;
    const chunk = JSON.parse(data.slice('data: '.length)) as Chunk;
    const choice = chunk.choices[0];
    const text = choice?.delta?.content ?? choice?.text;
    if (typeof text === 'string' && text.length > 0) out.push(text);
  }
  return out;
}

function lastFinish(body: string): string | null {
  const events = sseEvents(body).filter((e) => e.startsWith('{'));
  let finish: string | null = null;
  for (const e of events) finish = (JSON.parse(e) as Chunk).choices[0]?.finish_reason ?? finish;
  return finish;
}

describe.each(engines)('%s simulator: continued answers and deaths after token K', (engine) => {
  const fleet = new SimFleet();
  let sim: SimEngineHandle;
  let chatUrl: string;
  let completionsUrl: string;
  // vLLM refuses continue_final_message beside its default add_generation_prompt; SGLang ignores the latter.
  const continueFields = { continue_final_message: true, add_generation_prompt: false };

  beforeAll(async () => {
    sim = await fleet.start({ engine, role: 'both', admin: true });
    chatUrl = `${sim.url}/v1/chat/completions`;
    completionsUrl = `${sim.url}/v1/completions`;
  });
  afterEach(() => sim.setFault({ mode: 'ok' }));
  afterAll(() => fleet.closeAll());

  it('a chat whose final assistant message is its own first K tokens continues with the rest of the same answer', async () => {
    const whole = streamedTokens((await post(chatUrl, { model: 'sim-model', messages: CHAT, stream: true, seed: 7 })).text);
    expect(whole.length).toBeGreaterThan(10);
    for (const k of [1, 5, whole.length - 1]) {
      const prefix = whole.slice(0, k).join('');
      const res = await post(chatUrl, {
        model: 'sim-model',
        messages: [...CHAT, { role: 'assistant', content: prefix }],
        stream: true,
        seed: 7,
        ...continueFields,
      });
      expect(res.status).toBe(200);
      expect(streamedTokens(res.text)).toEqual(whole.slice(k));
      expect(lastFinish(res.text)).toBe('stop');
    }
  });

  it('max_tokens of a continuation counts from the continuation, as the engine sees it', async () => {
    const whole = streamedTokens((await post(chatUrl, { model: 'sim-model', messages: CHAT, stream: true, max_tokens: 20 })).text);
    expect(whole).toHaveLength(20);
    const res = await post(chatUrl, {
      model: 'sim-model',
      messages: [...CHAT, { role: 'assistant', content: whole.slice(0, 8).join('') }],
      stream: true,
      max_tokens: 12,
      ...continueFields,
    });
    expect(streamedTokens(res.text)).toEqual(whole.slice(8));
    expect(lastFinish(res.text)).toBe('length');
  });

  it('text the simulator did not produce gets a fresh answer, and without the flag a final assistant message is not continued', async () => {
    const whole = streamedTokens((await post(chatUrl, { model: 'sim-model', messages: CHAT, stream: true })).text);
    const foreign = await post(chatUrl, {
      model: 'sim-model',
      messages: [...CHAT, { role: 'assistant', content: 'Hello' }],
      stream: true,
      ...continueFields,
    });
    expect(streamedTokens(foreign.text).join('')).not.toBe(whole.slice(1).join(''));
    const prefix = whole.slice(0, 3).join('');
    const plain = await post(chatUrl, { model: 'sim-model', messages: [...CHAT, { role: 'assistant', content: prefix }], stream: true });
    expect(plain.status).toBe(200);
    expect(streamedTokens(plain.text)).not.toEqual(whole.slice(3));
  });

  it('vLLM refuses continue_final_message with add_generation_prompt (its default); SGLang ignores the latter', async () => {
    const res = await post(chatUrl, {
      model: 'sim-model',
      messages: [...CHAT, { role: 'assistant', content: 'x' }],
      continue_final_message: true,
    });
    if (engine === 'vllm') {
      expect(res.status).toBe(400);
      expect(res.text).toContain('continue_final_message');
    } else {
      expect(res.status).toBe(200);
    }
  });

  it('a completion prompt that ends with its own answer continues that answer', async () => {
    const prompt = 'Tell me about routers.';
    const whole = streamedTokens((await post(completionsUrl, { model: 'sim-model', prompt, stream: true, max_tokens: 30 })).text);
    expect(whole).toHaveLength(30);
    const res = await post(completionsUrl, {
      model: 'sim-model',
      prompt: prompt + whole.slice(0, 11).join(''),
      stream: true,
      max_tokens: 19,
    });
    expect(streamedTokens(res.text)).toEqual(whole.slice(11));
  });

  it.each([0, 1, 7])('die-mid-stream with afterTokens %i drops the stream after exactly that many tokens', async (k) => {
    const whole = streamedTokens((await post(chatUrl, { model: 'sim-model', messages: CHAT, stream: true, seed: 3 })).text);
    sim.setFault({ mode: 'die-mid-stream', count: 1, afterTokens: k });
    const res = await rawPost(chatUrl, { model: 'sim-model', messages: CHAT, stream: true, seed: 3 });
    expect(res.complete).toBe(false);
    expect(res.body).not.toContain('[DONE]');
    expect(streamedTokens(res.body)).toEqual(whole.slice(0, k));
  });

  it('die-mid-stream past the last token drops the stream after the whole text, before [DONE]', async () => {
    const whole = streamedTokens((await post(chatUrl, { model: 'sim-model', messages: CHAT, stream: true, max_tokens: 9 })).text);
    sim.setFault({ mode: 'die-mid-stream', count: 1, afterTokens: 1000 });
    const res = await rawPost(chatUrl, { model: 'sim-model', messages: CHAT, stream: true, max_tokens: 9 });
    expect(res.complete).toBe(false);
    expect(streamedTokens(res.body)).toEqual(whole);
    expect(res.body).not.toContain('[DONE]');
  });
});
