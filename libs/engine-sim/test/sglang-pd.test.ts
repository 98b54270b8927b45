import type { SimEngineHandle } from '@triad/engine-sim';
import { waitFor } from '@triad/testing';
import { CHAT, get, post, rawPost, SimFleet, sseEvents } from './helpers';

/** A PD body as the SGLang router builds it, written as raw JSON so the room keeps every digit. */
function pdBody(fields: Record<string, unknown>, host: string, port: number, room: string): string {
  return `{${Object.entries(fields)
    .map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v)}`)
    .join(',')},"bootstrap_host":"${host}","bootstrap_port":${port},"bootstrap_room":${room}}`;
}

describe('SGLang simulator: PD with the bootstrap server', () => {
  const fleet = new SimFleet();
  let prefill: SimEngineHandle;
  let decode: SimEngineHandle;
  let patient: SimEngineHandle;
  let body: (room: string, extra?: Record<string, unknown>) => string;

  beforeAll(async () => {
    prefill = await fleet.start({ engine: 'sglang', role: 'prefill', host: '127.0.0.6' });
    // Paths expected to succeed use `patient`: a decode waits for its room as long as a loaded machine takes to run
    // the prefill. Only the tests of the room timeout itself use the short `decode`.
    decode = await fleet.start({ engine: 'sglang', role: 'decode', host: '127.0.0.7', bootstrapTimeoutMs: 400 });
    patient = await fleet.start({ engine: 'sglang', role: 'decode', host: '127.0.0.8', bootstrapTimeoutMs: 60_000 });
    body = (room, extra = {}) =>
      pdBody({ model: 'sim-model', messages: CHAT, max_tokens: 4, ...extra }, prefill.host, prefill.bootstrapPort!, room);
  });
  afterAll(() => fleet.closeAll());

  it('runs a bootstrap server that answers /health with OK', async () => {
    expect(prefill.bootstrapPort).toBeGreaterThan(0);
    expect(await get(`http://${prefill.host}:${prefill.bootstrapPort}/health`)).toMatchObject({ status: 200, text: 'OK' });
  });

  it('serves P and D called concurrently with the same room (2^63-1, exact)', async () => {
    const room = '9223372036854775807';
    const [d, p] = await Promise.all([
      post(`${patient.url}/v1/chat/completions`, body(room)),
      post(`${prefill.url}/v1/chat/completions`, body(room)),
    ]);
    expect(p.status).toBe(200);
    expect(d.status).toBe(200);
    expect(d.json()).toMatchObject({ object: 'chat.completion', usage: { completion_tokens: 4 } });
    expect(patient.requests().at(-1)!.rawBody).toContain(`"bootstrap_room":${room}`);
    expect(prefill.counters()['roomsRegistered']).toBeGreaterThanOrEqual(1);
    expect(patient.counters()['roomsMatched']).toBeGreaterThanOrEqual(1);
  });

  it('lets a decode that arrives first wait until the prefill has registered the room', async () => {
    const room = '42';
    const pending = post(`${patient.url}/v1/chat/completions`, body(room));
    await waitFor(() => patient.requests().some((r) => r.rawBody.includes('"bootstrap_room":42}')), { what: 'decode request' });
    const p = await post(`${prefill.url}/v1/chat/completions`, body(room, { stream: true }));
    // The prefill accepts stream:true and returns a complete, valid stream.
    expect(sseEvents(p.text).at(-1)).toBe('[DONE]');
    expect((await pending).status).toBe(200);
  });

  it('fails the decode SGLang-style when the prefill is never called', async () => {
    const before = decode.counters()['bootstrapTimeouts'];
    const res = await post(`${decode.url}/v1/chat/completions`, body('1234567', { rid: 'late-1' }));
    expect(res.status).toBe(500);
    const err = res.json<Record<string, unknown>>();
    // An abort with 500 is raised as an HTTPException, whose handler writes the status as the type.
    expect(err).toMatchObject({ object: 'error', type: '500', param: null, code: 500 });
    expect(err['message']).toBe(
      "Decode transfer failed for request rank=0 req.rid='late-1' req.bootstrap_room=1234567 " +
        'with exception KVTransferError(bootstrap_room=1234567): Request 1234567 timed out after 0.4s in KVPoll.WaitingForInput',
    );
    expect(decode.counters()['bootstrapTimeouts']).toBe(before + 1);
  });

  it('reports the failure inside an already started stream', async () => {
    const res = await post(`${decode.url}/v1/chat/completions`, body('7654321', { stream: true }));
    expect(res.status).toBe(200);
    const events = sseEvents(res.text);
    expect(events).toHaveLength(2);
    // The OpenAI routes turn an abort with a status into `create_streaming_error_response(message, status.name, status)`.
    expect(JSON.parse(events[0])).toMatchObject({ error: { object: 'error', type: 'INTERNAL_SERVER_ERROR', param: null, code: 500 } });
    expect(events[1]).toBe('[DONE]');
  });

  it('does not confuse rooms that differ beyond 2^53 (mismatched rooms fail)', async () => {
    // JSON.parse maps both to 9007199254740992; the simulator must not.
    const [d, p] = await Promise.all([
      post(`${decode.url}/v1/chat/completions`, body('9007199254740993')),
      post(`${prefill.url}/v1/chat/completions`, body('9007199254740992')),
    ]);
    expect(p.status).toBe(200);
    expect(d.status).toBe(500);
  });

  it('routes /generate and completions the same way', async () => {
    const room = '18446744073709551615';
    const gen = pdBody(
      { text: 'The capital of France is', sampling_params: { max_new_tokens: 3 } },
      prefill.host,
      prefill.bootstrapPort!,
      room,
    );
    const [d, p] = await Promise.all([post(`${patient.url}/generate`, gen), post(`${prefill.url}/generate`, gen)]);
    expect(p.status).toBe(200);
    expect(d.json()).toMatchObject({ meta_info: { finish_reason: { type: 'length', length: 3 }, completion_tokens: 3 } });
    const cmpl = pdBody({ prompt: 'Hello', max_tokens: 2 }, prefill.host, prefill.bootstrapPort!, '5');
    const [dc] = await Promise.all([post(`${patient.url}/v1/completions`, cmpl), post(`${prefill.url}/v1/completions`, cmpl)]);
    expect(dc.json()).toMatchObject({ object: 'text_completion', usage: { completion_tokens: 2 } });
  });

  it.each([
    ['prefill', () => prefill],
    ['decode', () => decode],
  ])("%s rejects a request without a room with the scheduler's 400 (flat body; in the stream once streaming)", async (_mode, sim) => {
    const res = await post(`${sim().url}/v1/chat/completions`, { messages: CHAT, rid: 'no-room' });
    expect(res.status).toBe(400);
    expect(res.json()).toEqual({
      object: 'error',
      message: "Invalid request: Disaggregated request received without bootstrap room id. req.rid='no-room'",
      type: 'BadRequestError',
      param: null,
      code: 400,
    });
    const streamBody = { messages: CHAT, stream: true, bootstrap_host: 'h', bootstrap_port: 1 };
    const streamed = await post(`${sim().url}/v1/chat/completions`, streamBody);
    expect(streamed.status).toBe(200);
    const events = sseEvents(streamed.text);
    const message = expect.stringMatching(/^Invalid request: Disaggregated request received without bootstrap room id/);
    expect(JSON.parse(events[0])).toMatchObject({ error: { object: 'error', type: 'BAD_REQUEST', code: 400, message } });
    expect(events.at(-1)).toBe('[DONE]');
    const generate = await post(`${sim().url}/generate`, { text: 'hi', rid: 'g-no-room' });
    expect(generate.status).toBe(400);
    const generateMessage = "Invalid request: Disaggregated request received without bootstrap room id. req.rid='g-no-room'";
    expect(generate.json()).toEqual({ error: { message: generateMessage } });
    // A streamed /generate gets the aborted output itself: no text, the abort with its status as finish reason.
    const streamedGenerate = await post(`${sim().url}/generate`, { text: 'hi', rid: 'g-no-room-s', stream: true });
    expect(streamedGenerate.status).toBe(200);
    const generateEvents = sseEvents(streamedGenerate.text);
    expect(generateEvents).toHaveLength(2);
    expect(JSON.parse(generateEvents[0])).toMatchObject({
      text: '',
      output_ids: [],
      meta_info: {
        id: 'g-no-room-s',
        finish_reason: { type: 'abort', message: generateMessage.replace('g-no-room', 'g-no-room-s'), status_code: 400, err_type: null },
        completion_tokens: 0,
      },
    });
    expect(generateEvents[1]).toBe('[DONE]');
  });

  it("fails a decode whose bootstrap address answers nobody with SGLang's handshake error", async () => {
    const res = await post(`${decode.url}/v1/chat/completions`, pdBody({ messages: CHAT, max_tokens: 1 }, prefill.host, 9, '77'));
    expect(res.status).toBe(500);
    expect(res.json<{ message: string }>().message).toBe(
      'Decode handshake failed for request rank=0 bootstrap_room=77 with exception KVTransferError(bootstrap_room=77): ' +
        `Could not fetch prefill parallel info from bootstrap_addr: ${prefill.host}:9`,
    );
  });

  it('closes promptly while a decode is still waiting for its room', async () => {
    const waiting = await fleet.start({ engine: 'sglang', role: 'decode', bootstrapTimeoutMs: 120_000 });
    const pending = post(`${waiting.url}/v1/chat/completions`, body('31337')).catch((err: Error) => err);
    await waitFor(() => waiting.requests().length === 1, { what: 'decode request' });
    await waiting.close();
    expect(await pending).toMatchObject({ name: 'TypeError', message: 'fetch failed' });
  });

  it('counts a client that leaves while its decode waits for the room as aborted, not as a timeout', async () => {
    const waiting = await fleet.start({ engine: 'sglang', role: 'decode', bootstrapTimeoutMs: 120_000 });
    const abort = new AbortController();
    const pending = rawPost(`${waiting.url}/v1/chat/completions`, body('271828'), abort.signal);
    await waitFor(() => waiting.requests().length === 1, { what: 'decode request' });
    abort.abort();
    await pending;
    await waitFor(() => waiting.counters()['aborted'] === 1, { what: 'abort counted' });
    expect(waiting.counters()['bootstrapTimeouts']).toBe(0);
  });

  it('rejects a room that is not a non-negative integer', async () => {
    const res = await post(`${prefill.url}/v1/chat/completions`, body('-3'));
    expect(res.status).toBe(400);
  });
});

describe('SGLang simulator: OpenAI surface (unified role)', () => {
  const fleet = new SimFleet();
  let sim: SimEngineHandle;

  beforeAll(async () => {
    sim = await fleet.start({ engine: 'sglang', role: 'both', host: '127.0.0.8' });
  });
  afterAll(() => fleet.closeAll());

  it('streams chat SSE byte-for-byte as SGLang frames it (separate finish chunk, usage only when asked)', async () => {
    const plain = await post(`${sim.url}/v1/chat/completions`, { model: 'm', messages: CHAT, max_tokens: 3 });
    const tokens = plain.json<{ choices: { message: { content: string } }[] }>().choices[0].message.content.match(/ [a-z]+/g)!;
    const p = plain.json<{ usage: { prompt_tokens: number } }>().usage.prompt_tokens;
    const res = await post(
      `${sim.url}/v1/chat/completions`,
      { model: 'm', messages: CHAT, max_tokens: 3, stream: true, stream_options: { include_usage: true } },
      { 'x-request-id': 'sg-1' },
    );
    expect(res.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    const created = JSON.parse(sseEvents(res.text)[0]).created as number;
    const head = `{"id":"sg-1","object":"chat.completion.chunk","created":${created},"model":"m"`;
    const delta = (role: string, content: string) => `{"role":${role},"content":${content},"reasoning_content":null,"tool_calls":null}`;
    const expected = [
      `${head},"choices":[{"index":0,"delta":${delta('"assistant"', '""')},"logprobs":null,"finish_reason":null,"matched_stop":null}],` +
        `"usage":null}`,
      ...tokens.map(
        (t) =>
          `${head},"choices":[{"index":0,"delta":${delta('null', `"${t}"`)},"logprobs":null,"finish_reason":null,` +
          `"matched_stop":null}],"usage":null}`,
      ),
      `${head},"choices":[{"index":0,"delta":${delta('null', 'null')},"logprobs":null,"finish_reason":"length","matched_stop":null}],` +
        `"usage":null}`,
      `${head},"choices":[],"usage":{"prompt_tokens":${p},"total_tokens":${p + 3},"completion_tokens":3,"prompt_tokens_details":null}}`,
      '[DONE]',
    ]
      .map((e) => `data: ${e}\n\n`)
      .join('');
    expect(res.text).toBe(expected);
  });

  it('sends no usage chunk for stream_options {} (SGLang defaults include_usage to false)', async () => {
    const res = await post(`${sim.url}/v1/chat/completions`, { messages: CHAT, max_tokens: 2, stream: true, stream_options: {} });
    const events = sseEvents(res.text)
      .slice(0, -1)
      .map((e) => JSON.parse(e) as { choices: unknown[] });
    expect(events.every((e) => e.choices.length === 1)).toBe(true);
  });

  it('reports a natural stop with matched_stop set to the EOS token', async () => {
    const res = await post(`${sim.url}/v1/chat/completions`, { messages: CHAT, max_tokens: 500 });
    expect(res.json()).toMatchObject({ choices: [{ finish_reason: 'stop', matched_stop: 2 }], metadata: { weight_version: 'default' } });
  });

  it('streams /generate with cumulative text and a final meta_info', async () => {
    const res = await post(`${sim.url}/generate`, { text: 'Hello', sampling_params: { max_new_tokens: 3 }, stream: true, rid: 'g1' });
    const events = sseEvents(res.text);
    expect(events.at(-1)).toBe('[DONE]');
    const chunks = events.slice(0, -1).map(
      (e) =>
        JSON.parse(e) as {
          text: string;
          output_ids: number[];
          meta_info: { id: string; finish_reason: unknown; completion_tokens: number };
        },
    );
    expect(chunks).toHaveLength(3);
    expect(chunks[2].text.startsWith(chunks[1].text)).toBe(true);
    // Cumulative ids and counts, as upstream without --incremental-streaming-output.
    expect(chunks.map((c) => c.output_ids.length)).toEqual([1, 2, 3]);
    expect(chunks[2].output_ids.slice(0, 2)).toEqual(chunks[1].output_ids);
    expect(chunks.map((c) => c.meta_info.completion_tokens)).toEqual([1, 2, 3]);
    expect(chunks.map((c) => c.meta_info.finish_reason)).toEqual([null, null, { type: 'length', length: 3 }]);
    expect(chunks[0].meta_info.id).toBe('g1');
    // tokenizer_manager.py's keys in its order (e2e_latency once finished).
    expect(Object.keys(chunks[2].meta_info)).toEqual([
      'id',
      'finish_reason',
      'prompt_tokens',
      'weight_version',
      'num_retractions',
      'reasoning_tokens',
      'completion_tokens',
      'cached_tokens',
      'e2e_latency',
    ]);
  });

  it.each([
    ['invalid JSON', '{"messages"'],
    ['empty messages', { messages: [] }],
  ])('rejects %s with the flat SGLang error shape', async (_name, bodyValue) => {
    const res = await post(`${sim.url}/v1/chat/completions`, bodyValue);
    expect(res.status).toBe(400);
    const err = res.json<Record<string, unknown>>();
    expect(Object.keys(err)).toEqual(['object', 'message', 'type', 'param', 'code']);
    expect(err).toMatchObject({ object: 'error', type: 'BadRequestError', code: 400 });
  });

  it('rejects a /generate without prompt with its own error body', async () => {
    const res = await post(`${sim.url}/generate`, { sampling_params: {} });
    expect(res.status).toBe(400);
    expect(res.json()).toEqual({ error: { message: 'Either text, input_ids or input_embeds should be provided.' } });
  });

  it('reports its server info on /server_info and the deprecated /get_server_info', async () => {
    for (const path of ['/server_info', '/get_server_info']) {
      expect((await get(`${sim.url}${path}`)).json()).toMatchObject({
        disaggregation_mode: 'null',
        disaggregation_bootstrap_port: 8998,
        dp_size: 1,
        tp_size: 1,
        load_balance_method: 'round_robin',
        language_only: false,
        encoder_bootstrap_port: 8997,
        encoder_urls: [],
        version: expect.stringMatching(/^0\.5\./),
      });
    }
  });

  it('lists the model with owned_by sglang', async () => {
    expect((await get(`${sim.url}/v1/models`)).json()).toMatchObject({
      object: 'list',
      data: [{ id: 'sim-model', owned_by: 'sglang', parent: null }],
    });
  });
});
