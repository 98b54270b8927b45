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
    expect(JSON.parse(sseEvents(d.text)[0])).toMatchObject({ error: { code: 500, type: 'InternalServerError' } });
    const pd = { bootstrap_host: prefill.host, bootstrap_port: prefill.bootstrapPort, bootstrap_room: 9 };
    const generate = { text: 'x', sampling_params: { n: 2 }, ...pd };
    const g = await post(`${decode.url}/generate`, generate);
    expect(g.status).toBe(500);
    expect(decode.counters()['parallelSamplingHangs']).toBe(3);
  });
});
