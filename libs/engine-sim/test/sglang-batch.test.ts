import type { SimEngineHandle } from '@triad/engine-sim';
import { CHAT, post, SimFleet, sseEvents } from './helpers';

interface GenerateOut {
  text: string;
  output_ids: number[];
  meta_info: { id: string; finish_reason: unknown; prompt_tokens: number; completion_tokens: number };
  index?: number;
}

interface CompletionOut {
  choices: { index: number; text: string; finish_reason: string | null }[];
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number } | null;
}

/** A PD body written as raw JSON, so rooms keep every digit. */
function raw(fields: Record<string, unknown>, pd: { host: string; port: number; room: string }): string {
  const head = Object.entries(fields)
    .map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v)}`)
    .join(',');
  return `{${head},"bootstrap_host":${JSON.stringify(pd.host)},"bootstrap_port":${pd.port},"bootstrap_room":${pd.room}}`;
}

describe('SGLang simulator: batches on /generate and completions', () => {
  const fleet = new SimFleet();
  let prefill: SimEngineHandle;
  let decode: SimEngineHandle;
  let unified: SimEngineHandle;

  beforeAll(async () => {
    prefill = await fleet.start({ engine: 'sglang', role: 'prefill', host: '127.0.0.25' });
    // Long enough for a loaded CI machine: at 300 ms a decode leg once gave up before its prefill leg had
    // registered the rooms (the timeout itself is tested below, on engines of its own).
    decode = await fleet.start({ engine: 'sglang', role: 'decode', host: '127.0.0.26', bootstrapTimeoutMs: 2000 });
    unified = await fleet.start({ engine: 'sglang', role: 'both', host: '127.0.0.27' });
  });
  afterAll(() => fleet.closeAll());

  const both = (path: string, body: string) => Promise.all([post(`${prefill.url}${path}`, body), post(`${decode.url}${path}`, body)]);
  const pd = (room: string) => ({ host: prefill.host, port: prefill.bootstrapPort!, room });

  it('pairs a /generate text batch with a room list as given, and answers with one entry per prompt', async () => {
    const before = decode.counters()['roomsMatched'];
    const fields = { text: ['The capital of France is', 'Two plus two is'], sampling_params: { max_new_tokens: 3 }, rid: ['b-0', 'b-1'] };
    const body = raw(fields, pd('[9223372036854775806,9223372036854775807]'));
    const [p, d] = await both('/generate', body);
    expect([p.status, d.status]).toEqual([200, 200]);
    expect(p.json<GenerateOut[]>()).toHaveLength(2);
    const out = d.json<GenerateOut[]>();
    expect(out.map((o) => [o.meta_info.id, o.meta_info.completion_tokens, o.output_ids.length])).toEqual([
      ['b-0', 3, 3],
      ['b-1', 3, 3],
    ]);
    expect(out[0].text).not.toBe(out[1].text);
    expect(decode.counters()['roomsMatched']).toBe(before + 2);
  });

  it('expands a scalar room to room + i for an input_ids batch, exactly beyond 2^53', async () => {
    const body = raw(
      {
        input_ids: [
          [1, 2, 3],
          [4, 5, 6],
          [7, 8, 9],
        ],
        sampling_params: { max_new_tokens: 2 },
      },
      pd('9007199254740993'),
    );
    const [p, d] = await both('/generate', body);
    expect([p.status, d.status]).toEqual([200, 200]);
    expect(d.json<GenerateOut[]>()).toHaveLength(3);
    // The prefill registered rooms 9007199254740993..5; a decode asking for room + 1 alone finds it already taken.
    const again = await post(`${decode.url}/generate`, raw({ text: 'x', sampling_params: { max_new_tokens: 1 } }, pd('9007199254740994')));
    expect(again.status).toBe(500);
  });

  it('streams a /generate batch with every event labelled by its prompt index', async () => {
    const body = raw({ text: ['a b c', 'd e f'], sampling_params: { max_new_tokens: 3 }, stream: true }, pd('[101,102]'));
    const [, d] = await both('/generate', body);
    const events = sseEvents(d.text);
    expect(events.at(-1)).toBe('[DONE]');
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e) as GenerateOut);
    expect(chunks).toHaveLength(6);
    for (const index of [0, 1]) {
      const mine = chunks.filter((c) => c.index === index);
      expect(mine.map((c) => c.meta_info.completion_tokens)).toEqual([1, 2, 3]);
      expect(mine[2].meta_info.finish_reason).toEqual({ type: 'length', length: 3 });
    }
  });

  it('rejects a room list whose length is not the batch size', async () => {
    const res = await post(`${decode.url}/generate`, raw({ text: ['a', 'b'] }, pd('[1,2,3]')));
    expect(res.status).toBe(400);
    expect(res.json<{ error: { message: string } }>().error.message).toMatch(/^bootstrap_room has 3 entries/);
  });

  it('answers a completions prompt list with indexed choices and summed usage, streamed or not', async () => {
    const plain = await post(`${unified.url}/v1/completions`, { prompt: ['Hello', 'Bonjour tout le monde'], max_tokens: 2 });
    const body = plain.json<CompletionOut>();
    expect(body.choices.map((c) => [c.index, c.finish_reason])).toEqual([
      [0, 'length'],
      [1, 'length'],
    ]);
    const single = await post(`${unified.url}/v1/completions`, { prompt: 'Hello', max_tokens: 2 });
    const other = await post(`${unified.url}/v1/completions`, { prompt: 'Bonjour tout le monde', max_tokens: 2 });
    const prompt = single.json<CompletionOut>().usage!.prompt_tokens + other.json<CompletionOut>().usage!.prompt_tokens;
    expect(body.usage).toMatchObject({ prompt_tokens: prompt, completion_tokens: 4, total_tokens: prompt + 4 });
    expect(body.choices[1].text).toBe(other.json<CompletionOut>().choices[0].text);

    const streamBody = { prompt: ['Hello', 'Bonjour tout le monde'], max_tokens: 2, stream: true, stream_options: { include_usage: true } };
    const streamed = await post(`${unified.url}/v1/completions`, streamBody);
    const chunks = sseEvents(streamed.text)
      .slice(0, -1)
      .map((e) => JSON.parse(e) as CompletionOut);
    expect(chunks.filter((c) => c.choices[0]?.index === 0)).toHaveLength(2);
    expect(chunks.filter((c) => c.choices[0]?.index === 1)).toHaveLength(2);
    expect(chunks.at(-1)).toMatchObject({ choices: [], usage: { prompt_tokens: prompt, completion_tokens: 4 } });
  });

  it('pairs a completions prompt list under PD with one room per prompt', async () => {
    const [p, d] = await both('/v1/completions', raw({ prompt: ['one', 'two'], max_tokens: 2 }, pd('[201,202]')));
    expect(p.status).toBe(200);
    expect(d.json<CompletionOut>().choices.map((c) => c.index)).toEqual([0, 1]);
  });
});

describe('SGLang simulator: n > 1 under PD behaves as upstream (samples collide on one room)', () => {
  const fleet = new SimFleet();
  let prefill: SimEngineHandle;
  let decode: SimEngineHandle;

  beforeAll(async () => {
    prefill = await fleet.start({ engine: 'sglang', role: 'prefill', host: '127.0.0.28', bootstrapTimeoutMs: 200 });
    decode = await fleet.start({ engine: 'sglang', role: 'decode', host: '127.0.0.29', bootstrapTimeoutMs: 200 });
  });
  afterAll(() => fleet.closeAll());

  const body = (room: number, extra: Record<string, unknown> = {}) => ({
    messages: CHAT,
    max_tokens: 2,
    n: 3,
    rid: `n-${room}`,
    bootstrap_host: prefill.host,
    bootstrap_port: prefill.bootstrapPort,
    bootstrap_room: [room, room, room],
    ...extra,
  });

  it("hangs both legs until the waiting timeout, then fails them with 500 and SGLang's texts", async () => {
    const [p, d] = await Promise.all([
      post(`${prefill.url}/v1/chat/completions`, body(7)),
      post(`${decode.url}/v1/chat/completions`, body(7)),
    ]);
    expect([p.status, d.status]).toEqual([500, 500]);
    expect(d.json<{ message: string }>().message).toBe(
      "Decode transfer failed for request rank=0 req.rid='n-7' req.bootstrap_room=7 " +
        'with exception KVTransferError(bootstrap_room=7): Request 7 timed out after 0.2s in KVPoll.WaitingForInput',
    );
    const prefillMessage = p.json<{ message: string }>().message;
    expect(prefillMessage).toMatch(/^Prefill bootstrap failed for request rank=0 req\.rid='n-7' req\.bootstrap_room=7 /);
    expect(prefillMessage).toMatch(/KVPoll\.Bootstrapping$/);
    expect(decode.counters()).toMatchObject({ parallelSamplingHangs: 1, roomsMatched: 0 });
  });

  it('fails a streamed n > 1 request inside the stream, and /generate with sampling_params.n the same way', async () => {
    const d = await post(`${decode.url}/v1/chat/completions`, body(8, { stream: true }));
    expect(d.status).toBe(200);
    expect(JSON.parse(sseEvents(d.text)[0])).toMatchObject({ error: { code: 500, type: 'INTERNAL_SERVER_ERROR' } });
    const pd = { bootstrap_host: prefill.host, bootstrap_port: prefill.bootstrapPort, bootstrap_room: 9 };
    const generate = { text: 'x', sampling_params: { n: 2 }, ...pd };
    const g = await post(`${decode.url}/generate`, generate);
    expect(g.status).toBe(500);
    expect(decode.counters()['parallelSamplingHangs']).toBe(3);
  });
});

describe('SGLang simulator: n > 1 on /generate of an aggregated server, as upstream samples in parallel', () => {
  const fleet = new SimFleet();
  let unified: SimEngineHandle;

  beforeAll(async () => {
    unified = await fleet.start({ engine: 'sglang', role: 'both', host: '127.0.0.30' });
  });
  afterAll(() => fleet.closeAll());

  /** A prompt's own prompt_tokens and one-sample text, asked for without n. */
  async function single(text: string, maxNewTokens: number): Promise<GenerateOut> {
    const res = await post(`${unified.url}/generate`, { text, sampling_params: { max_new_tokens: maxNewTokens } });
    expect(res.status).toBe(200);
    return res.json<GenerateOut>();
  }

  it('answers one prompt with n=3 as a list of three outputs, each with its own meta_info and text', async () => {
    const one = await single('Hello there', 4);
    const res = await post(`${unified.url}/generate`, { text: 'Hello there', sampling_params: { n: 3, max_new_tokens: 4 } });
    expect(res.status).toBe(200);
    const out = res.json<GenerateOut[]>();
    expect(Array.isArray(out)).toBe(true);
    expect(out.map((o) => [o.meta_info.prompt_tokens, o.meta_info.completion_tokens, o.output_ids.length])).toEqual([
      [one.meta_info.prompt_tokens, 4, 4],
      [one.meta_info.prompt_tokens, 4, 4],
      [one.meta_info.prompt_tokens, 4, 4],
    ]);
    // Every sample is its own request upstream (a fresh rid each) and samples on its own.
    expect(new Set(out.map((o) => o.meta_info.id)).size).toBe(3);
    expect(out.every((o) => /^[0-9a-f]{32}$/.test(o.meta_info.id))).toBe(true);
    expect(new Set(out.map((o) => o.text)).size).toBe(3);
    expect(out[0].text).toBe(one.text);
  });

  it('orders a batch × n prompt-major: the samples of prompt 0, then those of prompt 1', async () => {
    const [a, b] = await Promise.all([single('a b', 2), single('c d e f g h i j', 3)]);
    const res = await post(`${unified.url}/generate`, {
      text: ['a b', 'c d e f g h i j'],
      sampling_params: [
        { n: 2, max_new_tokens: 2 },
        { n: 2, max_new_tokens: 3 },
      ],
    });
    expect(res.status).toBe(200);
    const out = res.json<GenerateOut[]>();
    expect(out.map((o) => [o.meta_info.prompt_tokens, o.meta_info.completion_tokens])).toEqual([
      [a.meta_info.prompt_tokens, 2],
      [a.meta_info.prompt_tokens, 2],
      [b.meta_info.prompt_tokens, 3],
      [b.meta_info.prompt_tokens, 3],
    ]);
    expect(a.meta_info.prompt_tokens).not.toBe(b.meta_info.prompt_tokens);
    expect([out[0].text, out[2].text]).toEqual([a.text, b.text]);
    expect(out[1].text).not.toBe(out[0].text);
  });

  it('streams every output interleaved, each event with its output index, and one [DONE]', async () => {
    // More tokens than the zero profile writes per event-loop turn (16), so the outputs take turns.
    const tokens = 20;
    const [a, b] = await Promise.all([single('a b', tokens), single('c d e f g h i j', tokens)]);
    const res = await post(`${unified.url}/generate`, {
      text: ['a b', 'c d e f g h i j'],
      stream: true,
      sampling_params: { n: 2, max_new_tokens: tokens },
    });
    expect(res.status).toBe(200);
    const events = sseEvents(res.text);
    expect(events.filter((e) => e === '[DONE]')).toHaveLength(1);
    expect(events.at(-1)).toBe('[DONE]');
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e) as GenerateOut);
    expect(chunks).toHaveLength(4 * tokens);
    // Interleaved: the outputs run concurrently, so index 0 has not ended when another output's events begin.
    const firstOf = (index: number) => chunks.findIndex((c) => c.index === index);
    const lastOf = (index: number) => chunks.findLastIndex((c) => c.index === index);
    expect(firstOf(1)).toBeLessThan(lastOf(0));
    const prompts = [a.meta_info.prompt_tokens, a.meta_info.prompt_tokens, b.meta_info.prompt_tokens, b.meta_info.prompt_tokens];
    for (const [index, prompt] of prompts.entries()) {
      const mine = chunks.filter((c) => c.index === index);
      expect(mine.map((c) => [c.meta_info.prompt_tokens, c.meta_info.completion_tokens])).toEqual(
        Array.from({ length: tokens }, (_, i) => [prompt, i + 1]),
      );
      expect(new Set(mine.map((c) => c.meta_info.id)).size).toBe(1);
      expect(mine.at(-1)?.meta_info.finish_reason).toEqual({ type: 'length', length: tokens });
    }
    expect(new Set(chunks.map((c) => c.meta_info.id)).size).toBe(4);
  });

  it('serves the later samples from the prefix the first request cached (cached_tokens)', async () => {
    const text = 'The history of the city, its rivers, bridges and markets, told from the first settlement onward. '.repeat(4);
    const res = await post(`${unified.url}/generate`, { text, sampling_params: { n: 2, max_new_tokens: 1 } });
    const out = res.json<(GenerateOut & { meta_info: { cached_tokens: number } })[]>();
    // Upstream sends each prompt once with max_new_tokens 0 first, so every sample finds its prefix in the cache.
    expect(out.map((o) => o.meta_info.cached_tokens)).toEqual([out[0].meta_info.cached_tokens, out[0].meta_info.cached_tokens]);
    expect(out[0].meta_info.cached_tokens).toBeGreaterThan(0);
  });

  it('refuses a batch whose prompts ask for different n, as upstream', async () => {
    const res = await post(`${unified.url}/generate`, { text: ['a', 'b'], sampling_params: [{ n: 2 }, { n: 3 }] });
    expect(res.status).toBe(400);
    expect(JSON.stringify(res.json())).toContain('The parallel_sample_num should be the same for all samples in sample params.');
  });

  it('still refuses n > 1 on chat and completions outside PD (not modelled)', async () => {
    const res = await post(`${unified.url}/v1/chat/completions`, { messages: CHAT, n: 2, max_tokens: 2 });
    expect(res.status).toBe(400);
  });
});
