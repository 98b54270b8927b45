import { clientWantsUsage, encoderBody, finalLegBody, sglangBody, vllmPrefillBody, type EncoderItem } from './request-bodies';
import { extractMediaParts, type MediaPart } from '@triad/request';
import { SeededRandom } from '@triad/testing/reliability';

describe('clientWantsUsage', () => {
  it.each([
    { options: undefined, engine: 'vLLM', want: false },
    { options: { include_usage: true }, engine: 'SGLang', want: true },
    { options: { include_usage: false }, engine: 'vLLM', want: false },
    // vLLM turns usage on as soon as stream_options is present; SGLang does not.
    { options: {}, engine: 'vLLM', want: true },
    { options: {}, engine: 'SGLang', want: false },
  ] as const)('stream_options $options on $engine → $want', ({ options, engine, want }) => {
    expect(clientWantsUsage(options === undefined ? {} : { stream_options: options }, engine)).toBe(want);
  });
});

describe('finalLegBody', () => {
  it('injects include_usage into streams, keeping other stream options', () => {
    expect(JSON.parse(finalLegBody({ model: 'm', stream: true, stream_options: { continuous_usage_stats: true } }, true))).toEqual({
      model: 'm',
      stream: true,
      stream_options: { continuous_usage_stats: true, include_usage: true },
    });
  });
  it('leaves non-stream bodies alone', () => {
    expect(finalLegBody({ model: 'm', max_tokens: 3 }, false)).toBe('{"model":"m","max_tokens":3}');
  });
  it('adds the prefill kv_transfer_params verbatim, replacing a client value', () => {
    expect(finalLegBody({ model: 'm', kv_transfer_params: { x: 1 } }, false, '{"remote_engine_id":"e","remote_block_ids":[1]}')).toBe(
      '{"model":"m","kv_transfer_params":{"remote_engine_id":"e","remote_block_ids":[1]}}',
    );
  });
});

describe('vllmPrefillBody', () => {
  it('asks for one token without streaming and with a remote decode', () => {
    const body = JSON.parse(
      vllmPrefillBody(
        { model: 'm', stream: true, stream_options: { include_usage: true }, max_tokens: 50, max_completion_tokens: 50 },
        true,
      ),
    );
    expect(body).toEqual({
      model: 'm',
      stream: false,
      max_tokens: 1,
      max_completion_tokens: 1,
      kv_transfer_params: {
        do_remote_decode: true,
        do_remote_prefill: false,
        remote_engine_id: null,
        remote_block_ids: null,
        remote_host: null,
        remote_port: null,
      },
    });
  });
  it("drops min_tokens, which vLLM refuses above the prefill leg's one token, and leaves everything else", () => {
    const body = JSON.parse(
      vllmPrefillBody({ model: 'm', max_tokens: 50, min_tokens: 4, min_completion_tokens: 4, temperature: 0 }, false),
    );
    expect(body).toEqual({ model: 'm', stream: false, max_tokens: 1, temperature: 0 });
  });
  it('asks for one sample: every vLLM sample would keep blocks of its own for a decode that reads one set', () => {
    expect(JSON.parse(vllmPrefillBody({ model: 'm', max_tokens: 5, n: 3 }, true))).toMatchObject({ n: 1, max_tokens: 1 });
  });
  it('adds max_completion_tokens only when the client sent it, and no KV params for the http connector', () => {
    expect(JSON.parse(vllmPrefillBody({ model: 'm', max_tokens: 5 }, false))).toEqual({ model: 'm', stream: false, max_tokens: 1 });
  });
});

describe('encoderBody', () => {
  const audio = { type: 'input_audio', input_audio: { data: 'AAA', format: 'wav' } };
  const image = (url: string, uuid?: string) => ({ type: 'image_url', image_url: { url }, ...(uuid ? { uuid } : {}) });
  const body = {
    model: 'vl',
    temperature: 0,
    max_tokens: 50,
    messages: [
      { role: 'system', content: 'be brief' },
      { role: 'user', content: [{ type: 'text', text: 't' }, image('u0', 'mine'), image('u1'), audio] },
    ],
    mm_processor_kwargs: { fps: 2 },
    media_io_kwargs: { video: { num_frames: 8 } },
    priority: -1,
    session_id: 's-1',
  };
  const parts = extractMediaParts(body);

  it("holds only the group's parts with their uuids, no text, no max_tokens, no sampling, and the four kwargs fields", () => {
    expect(
      JSON.parse(
        encoderBody(body, parts.slice(0, 2), [
          { uuid: 'mine', transferId: undefined },
          { uuid: 'h1', transferId: undefined },
        ]),
      ),
    ).toEqual({
      model: 'vl',
      messages: [{ role: 'user', content: [image('u0', 'mine'), image('u1', 'h1')] }],
      stream: false,
      mm_processor_kwargs: { fps: 2 },
      media_io_kwargs: { video: { num_frames: 8 } },
      priority: -1,
      session_id: 's-1',
    });
    // The client's part keeps its identity when it already carries the uuid (nothing is copied).
    expect(encoderBody({ model: 'vl', messages: body.messages }, [parts[2]], [{ uuid: 'h2', transferId: undefined }])).toBe(
      '{"model":"vl","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AAA","format":"wav"},' +
        '"uuid":"h2"}]}],"stream":false}',
    );
  });

  it('names the push consumer and one transfer id per part, in order, for a push connector', () => {
    const sent = JSON.parse(
      encoderBody(
        body,
        parts.slice(0, 2),
        [
          { uuid: 'a', transferId: 't0' },
          { uuid: 'b', transferId: 't1' },
        ],
        'tcp://10.0.0.9:14580',
      ),
    );
    expect(sent.ec_transfer_params).toEqual({
      consumer_zmq: 'tcp://10.0.0.9:14580',
      ec_items: [{ transfer_id: 't0' }, { transfer_id: 't1' }],
    });
  });

  it('writes the text JSON.stringify gives the request object, on generated bodies, parts and uuids', () => {
    const random = new SeededRandom(33);
    const pick = <T>(list: readonly T[]): T => list[random.int(list.length)];
    /** The encoder request as it was built before it was written by hand: the object, then JSON.stringify. */
    const reference = (b: Record<string, unknown>, ps: readonly MediaPart[], its: readonly EncoderItem[], zmq?: string): string => {
      const content = ps.map((p, i) => (p.part['uuid'] === its[i].uuid ? p.part : { ...p.part, uuid: its[i].uuid }));
      const request: Record<string, unknown> = { model: b['model'], messages: [{ role: 'user', content }], stream: false };
      for (const field of ['mm_processor_kwargs', 'media_io_kwargs', 'priority', 'session_id'])
        if (b[field] !== undefined) request[field] = b[field];
      if (zmq !== undefined)
        request['ec_transfer_params'] = { consumer_zmq: zmq, ec_items: its.map((i) => ({ transfer_id: i.transferId })) };
      return JSON.stringify(request);
    };
    const values = ['vl', 'é "q" \\', '\u0001', '', 0, -1.5, 1e21, true, null, { fps: 2 }, [1, 'a'], undefined];
    const uuids = ['mine', 'h"1', 'caf\u00e9', '\ud800', ''];
    const partsOf = (): Record<string, unknown>[] => [
      { type: 'image_url', image_url: { url: pick(['u0', 'data:image/png;base64,AAA', 'é']) } },
      { type: 'image_url', image_url: { url: 'u1' }, uuid: pick(uuids) },
      { uuid: pick(uuids), type: 'image_url', image_url: { url: 'u2' } },
      { type: 'input_audio', input_audio: { data: 'AAA', format: 'wav' }, uuid: null },
      { type: 'video_url', video_url: { url: 'v' }, extra: pick(values) },
    ];
    for (let n = 0; n < 2_000; n++) {
      const b: Record<string, unknown> = { messages: [{ role: 'user', content: partsOf().slice(0, 1 + random.int(5)) }] };
      for (const field of ['model', 'mm_processor_kwargs', 'media_io_kwargs', 'priority', 'session_id', 'max_tokens']) {
        if (random.int(2) === 0) b[field] = pick(values);
      }
      const all = extractMediaParts(b);
      const group = all.slice(0, 1 + random.int(Math.max(1, all.length)));
      const items = group.map((p) => ({
        uuid: random.int(3) === 0 && typeof p.part['uuid'] === 'string' ? p.part['uuid'] : pick(uuids),
        transferId: pick(['t0', undefined]),
      }));
      const zmq = random.int(3) === 0 ? 'tcp://10.0.0.9:14580' : undefined;
      expect(encoderBody(b, group, items, zmq)).toBe(reference(b, group, items, zmq));
    }
  });
});

describe('sglangBody', () => {
  const prefill = { key: 'k', pod: 'p', ip: '10.0.0.7', port: 30000 };
  it("adds host, default port 8998 and an exact room, dropping the client's bootstrap and DP fields", () => {
    const out = sglangBody({ model: 'm', bootstrap_room: 1, routed_dp_rank: 3, disagg_prefill_dp_rank: 1, stream: false }, false, prefill);
    expect(out.rooms).toHaveLength(1);
    expect(out.prefillBody).toBe(
      `{"model":"m","stream":false,"bootstrap_host":"10.0.0.7","bootstrap_port":8998,"bootstrap_room":${out.rooms[0]}}`,
    );
    // Without DP ranks both legs get the very same text.
    expect(out.decodeBody).toBe(out.prefillBody);
  });
  it('uses the endpoint bootstrap port and brackets IPv6; never sends epd_bootstrap_addr', () => {
    const { prefillBody } = sglangBody({ model: 'm' }, false, { ...prefill, ip: 'fd00::1', bootstrapPort: 9000 });
    expect(JSON.parse(prefillBody)).toMatchObject({ bootstrap_host: '[fd00::1]', bootstrap_port: 9000 });
    expect(prefillBody).not.toContain('epd_bootstrap_addr');
  });
  it('pins DP ranks per leg: the prefill its own, the decode its own and where the KV is', () => {
    const out = sglangBody({ model: 'm', routed_dp_rank: 7 }, false, prefill, { prefill: 1, decode: 0 });
    const p = JSON.parse(out.prefillBody) as Record<string, unknown>;
    const d = JSON.parse(out.decodeBody) as Record<string, unknown>;
    expect(p).toMatchObject({ routed_dp_rank: 1 });
    expect(p).not.toHaveProperty('disagg_prefill_dp_rank');
    expect(d).toMatchObject({ routed_dp_rank: 0, disagg_prefill_dp_rank: 1 });
    expect(p['bootstrap_room']).toBe(d['bootstrap_room']);
    // A DP prefill in front of a decode without DP: the decode still learns the prefill's rank.
    const half = sglangBody({ model: 'm' }, false, prefill, { prefill: 2 });
    expect(JSON.parse(half.decodeBody)).toMatchObject({ disagg_prefill_dp_rank: 2 });
    expect(JSON.parse(half.decodeBody)).not.toHaveProperty('routed_dp_rank');
  });
  it.each([
    { name: 'completions with a prompt list', body: { model: 'm', prompt: ['a', 'b', 'c'] }, n: 3 },
    { name: 'completions with token-id lists', body: { model: 'm', prompt: [[1, 2], [3]] }, n: 2 },
    { name: '/generate with a text list', body: { text: ['a', 'b'] }, n: 2 },
    { name: '/generate with input_ids lists', body: { input_ids: [[1], [2], [3]] }, n: 3 },
    { name: '/generate with one input_ids list', body: { input_ids: [1, 2, 3] }, n: 1 },
    { name: 'a single token-id prompt', body: { model: 'm', prompt: [1, 2, 3] }, n: 1 },
    { name: '/generate with an input_embeds batch', body: { input_embeds: [[[0.1]], [[0.2]]] }, n: 2 },
    { name: '/generate with a text string beside input_ids lists (text decides)', body: { text: 'a', input_ids: [[1], [2]] }, n: 1 },
    { name: '/generate with an empty text list (still one room)', body: { text: [] }, n: 1 },
  ])('batches: $name gets $n rooms', ({ body, n }) => {
    const out = sglangBody(body, false, prefill);
    expect(out.rooms).toHaveLength(n);
    const parsed = JSON.parse(out.prefillBody) as Record<string, unknown>;
    if (n === 1) expect(parsed['bootstrap_host']).toBe('10.0.0.7');
    else expect(parsed['bootstrap_host']).toEqual(new Array(n).fill('10.0.0.7'));
    expect(out.prefillBody).toContain(`"bootstrap_room":${n === 1 ? out.rooms[0] : `[${out.rooms.join(',')}]`}`);
  });
  it('injects include_usage into streams', () => {
    expect(JSON.parse(sglangBody({ model: 'm', stream: true }, true, prefill).prefillBody).stream_options).toEqual({ include_usage: true });
  });
});

describe('finalLegBody', () => {
  it('pins routed_dp_rank when given, after usage injection', () => {
    expect(JSON.parse(finalLegBody({ model: 'm', stream: true }, true, undefined, 1))).toEqual({
      model: 'm',
      stream: true,
      stream_options: { include_usage: true },
      routed_dp_rank: 1,
    });
  });
});
