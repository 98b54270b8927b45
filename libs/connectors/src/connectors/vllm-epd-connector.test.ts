import { createHash } from 'node:crypto';
import type { Attempt, Decision, EncoderChoice } from '@triad/bus';
import { ErrorCode } from '@triad/errors';
import { EcHandoffError, SchedulingError, type EcProfile } from '@triad/request';
import { proxyRequest, serverProfile } from '@triad/request/testing';
import { FakeLegRunner, engineError, type FakeOutcome } from '../testing';
import type { LegSpec } from '../types';
import { VllmEpdConnector } from './vllm-epd-connector';

const ep = (pod: string, n: number, extra: object = {}) => ({ key: `default.epd.${pod}`, pod, ip: `10.0.1.${n}`, port: 8000, ...extra });
const choice = (item: number, endpoint: EncoderChoice['endpoint'], ...alternates: EncoderChoice['endpoint'][]): EncoderChoice => ({
  item,
  endpoint,
  alternates,
  affinity: false,
});
const [e0, e1, e2, p0, d0] = [ep('e-0', 1), ep('e-1', 2), ep('e-2', 3), ep('p-0', 4), ep('d-0', 5)];
const pdDp = ep('pd-0', 6, { dpSize: 2, ecControlAddresses: ['tcp://10.0.1.6:14579', 'tcp://10.0.1.6:14580'] });
const ec = (overrides: Partial<EcProfile> = {}): EcProfile => ({
  connector: 'shared-storage',
  push: false,
  mmEmbeds: false,
  maxEncoderBatch: 16,
  reencodeAttempts: 1,
  ...overrides,
});
const MOONCAKE = ec({ connector: 'mooncake', push: true, mmEmbeds: true });
const serverWith = (profile: EcProfile) =>
  serverProfile({
    name: 'epd',
    mode: 'epd',
    connector: 'vllm-epd',
    relayKvParams: true,
    retry: { retries: 5, intervalMs: 7 },
    timeouts: { encodeMs: 11, prefillMs: 12, firstByteMs: 13, totalMs: 14 },
    ec: profile,
  });
const server = serverWith(ec());
const sha = (s: string) => createHash('sha256').update(s).digest('hex');
const image = (url: string) => ({ type: 'image_url', image_url: { url } });
const video = (url: string) => ({ type: 'video_url', video_url: { url } });
const body = {
  model: 'm',
  mm_processor_kwargs: { fps: 1 },
  media_io_kwargs: { video: { num_frames: 4 } },
  session_id: 's',
  temperature: 0.5,
  messages: [
    {
      role: 'user',
      content: [{ type: 'text', text: 'compare' }, image('https://i/a.png'), image('https://i/b.png'), image('https://i/c.png')],
    },
  ],
};
const decisionWith = (encoders: EncoderChoice[], attempts: Attempt[] = [{ endpoint: d0, prefill: p0 }]): Decision => ({
  id: 'r',
  ok: true,
  mode: 'epd',
  attempts,
  encoders,
});
const grid = [[1, 32, 32]];

/** A vLLM encoder that answers each item of its request with a keyed entry, `item_indices` and NIXL-like handles. */
function keyedEncoder(spec: LegSpec): FakeOutcome {
  const sent = JSON.parse(spec.body) as { messages: { content: { uuid: string }[] }[] };
  const params: Record<string, unknown> = {};
  sent.messages[0]?.content.forEach((p, i) => {
    params[`h-${p.uuid.slice(0, 8)}`] = {
      metadata: { image_grid_thw: grid },
      item_indices: [i],
      peer_host: spec.endpoint.ip,
      size_bytes: 4096,
    };
  });
  return { body: { object: 'chat.completion', ec_transfer_params: params } };
}

describe('VllmEpdConnector: encoder legs', () => {
  it('batches the images bound for one encoder, with uuids, kwargs and no max_tokens; then P/D get the encoder entries', async () => {
    const decision = decisionWith([choice(0, e0), choice(1, e1), choice(2, e0)]);
    const ctx = proxyRequest({ id: 'epd-1', body, server, decision });
    const run = new FakeLegRunner((spec) => (spec.stage === 'encode' ? keyedEncoder(spec) : {}));
    const connector = new VllmEpdConnector();
    await connector.prepare(ctx, run);
    const encodes = run.legsOf('encode');
    expect(encodes.map((l) => [l.spec.item, l.spec.endpoint.key, l.spec.path, l.spec.timeoutMs])).toEqual([
      [0, e0.key, '/v1/chat/completions', 11],
      [1, e1.key, '/v1/chat/completions', 11],
    ]);
    expect(encodes.map((l) => l.spec.requestId)).toEqual([
      expect.stringMatching(/^epd-1:0:[0-9a-f]{6}$/),
      expect.stringMatching(/^epd-1:1:/),
    ]);
    expect(encodes[0]?.json()).toEqual({
      model: 'm',
      stream: false,
      mm_processor_kwargs: { fps: 1 },
      media_io_kwargs: { video: { num_frames: 4 } },
      session_id: 's',
      messages: [
        {
          role: 'user',
          content: [
            { ...image('https://i/a.png'), uuid: sha('https://i/a.png') },
            { ...image('https://i/c.png'), uuid: sha('https://i/c.png') },
          ],
        },
      ],
    });
    await connector.attempt(ctx, decision.attempts[0], 0, run);
    const [prefill] = run.legsOf('prefill');
    const [decode] = run.legsOf('decode');
    // No rewrite without enableMmEmbeds: the raw parts go on, with the uuids the encoders saw, plus their entries.
    const parts = (prefill?.json().messages as { content: unknown[] }[])[0]?.content;
    expect(parts?.slice(1)).toEqual(['a', 'b', 'c'].map((x) => ({ ...image(`https://i/${x}.png`), uuid: sha(`https://i/${x}.png`) })));
    expect(prefill?.json().ec_transfer_params).toEqual({
      [`h-${sha('https://i/a.png').slice(0, 8)}`]: {
        metadata: { image_grid_thw: grid },
        item_indices: [0],
        peer_host: e0.ip,
        size_bytes: 4096,
      },
      [`h-${sha('https://i/b.png').slice(0, 8)}`]: {
        metadata: { image_grid_thw: grid },
        item_indices: [0],
        peer_host: e1.ip,
        size_bytes: 4096,
      },
      [`h-${sha('https://i/c.png').slice(0, 8)}`]: {
        metadata: { image_grid_thw: grid },
        item_indices: [1],
        peer_host: e0.ip,
        size_bytes: 4096,
      },
    });
    expect(decode?.json().ec_transfer_params).toEqual(prefill?.json().ec_transfer_params);
    expect(prefill?.spec.headers).toBeUndefined();
  });

  it('bounds a batch, sends audio and video alone, and keeps a client uuid', async () => {
    const mixed = {
      model: 'm',
      messages: [
        {
          role: 'user',
          content: [
            image('u0'),
            { ...image('u1'), uuid: 'client-1' },
            video('v'),
            image('u2'),
            { type: 'input_audio', input_audio: { data: 'AA', format: 'wav' } },
          ],
        },
      ],
    };
    const decision = decisionWith([0, 1, 2, 3, 4].map((i) => choice(i, e0)));
    const run = new FakeLegRunner((spec) => (spec.stage === 'encode' ? keyedEncoder(spec) : {}));
    await new VllmEpdConnector().prepare(proxyRequest({ body: mixed, server: serverWith(ec({ maxEncoderBatch: 2 })), decision }), run);
    const groups = run.legsOf('encode').map((l) => (l.json().messages as { content: { uuid: string }[] }[])[0]?.content.map((p) => p.uuid));
    expect(groups).toEqual([[sha('u0'), 'client-1'], [sha('v')], [sha('u2')], [expect.stringMatching(/^[0-9a-f]{64}$/)]]);
  });

  it('rewrites items to *_embeds references when the consumers accept them (vLLM --enable-mm-embeds)', async () => {
    const decision = decisionWith([choice(0, e0), choice(1, e1), choice(2, e0)]);
    const ctx = proxyRequest({ body, server: serverWith(ec({ mmEmbeds: true })), decision });
    const run = new FakeLegRunner((spec) => (spec.stage === 'encode' ? keyedEncoder(spec) : {}));
    const connector = new VllmEpdConnector();
    await connector.prepare(ctx, run);
    await connector.attempt(ctx, decision.attempts[0], 0, run);
    const content = (run.legsOf('prefill')[0]?.json().messages as { content: unknown[] }[])[0]?.content;
    expect(content).toEqual([
      { type: 'text', text: 'compare' },
      ...['a', 'b', 'c'].map((x) => ({
        type: 'image_embeds',
        image_embeds: { image_grid_thw: [1, 32, 32] },
        uuid: sha(`https://i/${x}.png`),
      })),
    ]);
    expect((run.legsOf('decode')[0]?.json().messages as { content: unknown[] }[])[0]?.content).toEqual(content);
    // The client's body is never changed.
    expect(body.messages[0]?.content[1]).toEqual(image('https://i/a.png'));
  });

  it("keeps every item raw when the request has audio and an item came back without metadata (vLLM's audio rule)", async () => {
    const withAudio = { model: 'm', messages: [{ role: 'user', content: [image('u0'), { type: 'audio_url', audio_url: { url: 'a' } }] }] };
    const decision = decisionWith([choice(0, e0), choice(1, e1)]);
    const ctx = proxyRequest({ body: withAudio, server: serverWith(ec({ mmEmbeds: true })), decision });
    const run = new FakeLegRunner((spec) =>
      spec.stage !== 'encode'
        ? {}
        : spec.endpoint.key === e1.key
          ? { body: { ec_transfer_params: { k: { metadata: {} } } } }
          : keyedEncoder(spec),
    );
    const connector = new VllmEpdConnector();
    await connector.prepare(ctx, run);
    await connector.attempt(ctx, decision.attempts[0], 0, run);
    const content = (run.legsOf('prefill')[0]?.json().messages as { content: unknown[] }[])[0]?.content;
    expect(content).toEqual([
      { ...image('u0'), uuid: sha('u0') },
      { type: 'audio_url', audio_url: { url: 'a' }, uuid: sha('a') },
    ]);
  });

  it.each([
    ['the older ec_items list', { ec_items: [{ mm_hash: 'x', metadata: { image_grid_thw: grid } }] }, 'x'],
    ['a single entry keyed by a hash of its own', { 'rehashed-key': { metadata: { image_grid_thw: grid } } }, 'rehashed-key'],
  ])('matches %s to a lone item', async (_name, params, hash) => {
    const one = { model: 'm', messages: [{ role: 'user', content: [image('u0')] }] };
    const decision = decisionWith([choice(0, e0)]);
    const ctx = proxyRequest({ body: one, server: serverWith(ec({ mmEmbeds: true })), decision });
    const run = new FakeLegRunner((spec) => (spec.stage === 'encode' ? { body: { ec_transfer_params: params } } : {}));
    const connector = new VllmEpdConnector();
    await connector.prepare(ctx, run);
    await connector.attempt(ctx, decision.attempts[0], 0, run);
    const sent = run.legsOf('prefill')[0]?.json();
    expect((sent?.messages as { content: unknown[] }[])[0]?.content).toEqual([
      { type: 'image_embeds', image_embeds: { image_grid_thw: [1, 32, 32] }, uuid: sha('u0') },
    ]);
    expect(Object.keys(sent?.ec_transfer_params as object)).toEqual([hash]);
  });

  it('flattens each metadata field one level, lists and numbers mixed, as the *_embeds part takes it', async () => {
    const one = { model: 'm', messages: [{ role: 'user', content: [image('u0')] }] };
    const decision = decisionWith([choice(0, e0)]);
    const ctx = proxyRequest({ body: one, server: serverWith(ec({ mmEmbeds: true })), decision });
    const metadata = {
      image_grid_thw: [
        [1, 32, 32],
        [2, 16, 16],
      ],
      second_per_grid_ts: [0.5, [1, [2]], []],
    };
    const params = { k: { metadata } };
    const run = new FakeLegRunner((spec) => (spec.stage === 'encode' ? { body: { ec_transfer_params: params } } : {}));
    const connector = new VllmEpdConnector();
    await connector.prepare(ctx, run);
    await connector.attempt(ctx, decision.attempts[0], 0, run);
    const text = run.legsOf('prefill')[0]?.spec.body;
    expect(text).toContain('"image_embeds":{"image_grid_thw":[1,32,32,2,16,16],"second_per_grid_ts":[0.5,1,[2]]}');
    // The entry itself goes to the consumer as the encoder wrote it.
    expect(text).toContain(`"ec_transfer_params":{"k":${JSON.stringify({ metadata })}}`);
  });

  it.each([
    [
      'a body that is not JSON',
      'not json',
      'invalid_encoder_answer',
      0,
      /encode of item 0 on default\.epd\.e-0: the encoder answered with a body that is not JSON/,
    ],
    [
      'an index out of range',
      { ec_transfer_params: { a: { item_indices: [0] }, b: { item_indices: [5] } } },
      'invalid_encoder_answer',
      0,
      /reported item index 5 for a request of 2 item/,
    ],
    [
      'a position reported twice',
      { ec_transfer_params: { a: { item_indices: [1] }, b: { item_indices: [1] } } },
      'item_mismatch',
      1,
      /encode of item 1 on default\.epd\.e-0: the encoder reported position 1 twice/,
    ],
    [
      'an item no entry matches',
      { ec_transfer_params: { a: { item_indices: [0] } } },
      'item_mismatch',
      1,
      /no entry of the encoder's answer matches the item/,
    ],
    ['params that are not an object', { ec_transfer_params: [1] }, 'invalid_encoder_answer', 0, /ec_transfer_params is not an object/],
  ])('fails with a 502 naming the item on %s', async (_name, answer, reason, item, message) => {
    const two = { model: 'm', messages: [{ role: 'user', content: [image('u0'), image('u1')] }] };
    const run = new FakeLegRunner((spec) => (spec.stage === 'encode' ? { body: answer as string } : {}));
    const err = await new VllmEpdConnector()
      .prepare(proxyRequest({ body: two, server, decision: decisionWith([choice(0, e0), choice(1, e0)]) }), run)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EcHandoffError);
    expect(err).toMatchObject({
      reason,
      stage: 'encode',
      item,
      endpoint: e0.key,
      code: ErrorCode.UpstreamError,
      message: expect.stringMatching(message),
    });
  });

  it('keeps items raw when the encoder reports no ec_transfer_params at all', async () => {
    const decision = decisionWith([choice(0, e0), choice(1, e0), choice(2, e1)]);
    const ctx = proxyRequest({ body, server: serverWith(ec({ mmEmbeds: true })), decision });
    const run = new FakeLegRunner(() => ({}));
    const connector = new VllmEpdConnector();
    await connector.prepare(ctx, run);
    await connector.attempt(ctx, decision.attempts[0], 0, run);
    const sent = run.legsOf('prefill')[0]?.json();
    expect((sent?.messages as { content: { type: string }[] }[])[0]?.content.map((p) => p.type)).toEqual([
      'text',
      'image_url',
      'image_url',
      'image_url',
    ]);
    expect(sent?.ec_transfer_params).toBeUndefined();
  });

  it('retries a group on its alternates, fails at once on an engine 4xx, and aborts the sibling legs of a failed run', async () => {
    const two = { model: 'm', messages: [{ role: 'user', content: [image('u0'), image('u1')] }] };
    const decision = decisionWith([choice(0, e0), choice(1, e1, e2)]);
    const flaky = new FakeLegRunner((spec) => (spec.endpoint.key === e1.key ? engineError(spec, 503, 'busy') : keyedEncoder(spec)));
    await new VllmEpdConnector().prepare(proxyRequest({ body: two, server, decision }), flaky);
    expect(flaky.legsOf('encode').map((l) => [l.spec.item, l.spec.endpoint.pod, l.spec.attempt])).toEqual([
      [0, 'e-0', 0],
      [1, 'e-1', 0],
      [1, 'e-2', 1],
    ]);
    expect(flaky.retries).toEqual([{ attempt: 0, error: expect.objectContaining({ stage: 'encode', item: 1, status: 503 }) }]);
    expect(flaky.pauses).toEqual([7]);

    const refused = new FakeLegRunner((spec) => (spec.item === 1 ? engineError(spec, 400, 'bad image') : 'hang'));
    await expect(new VllmEpdConnector().prepare(proxyRequest({ body: two, server, decision }), refused)).rejects.toMatchObject({
      code: ErrorCode.UpstreamError,
      stage: 'encode',
      item: 1,
      status: 400,
      message: expect.stringContaining('encode of item 1 on default.epd.e-1'),
    });
    expect(refused.retries).toEqual([]);
    // The hanging encode of item 0 is not left running.
    expect(refused.legsOf('encode')[0]?.abortedWith).toMatchObject({ item: 1, status: 400 });
  });

  it('sends nothing to the encoders for a text-only request, and names an item the decision gave no encoder', async () => {
    const run = new FakeLegRunner();
    const text = { model: 'm', messages: [{ role: 'user', content: 'no media' }] };
    await new VllmEpdConnector().prepare(proxyRequest({ body: text, server, decision: decisionWith([]) }), run);
    expect(run.legs).toEqual([]);
    const err = await new VllmEpdConnector()
      .prepare(proxyRequest({ body, server, decision: decisionWith([choice(0, e0)]) }), new FakeLegRunner())
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SchedulingError);
    expect(err).toMatchObject({ code: ErrorCode.SchedNoEncoder, stage: 'encode', item: 1 });
  });
});

describe('VllmEpdConnector: push connector (Mooncake)', () => {
  const two = { model: 'm', stream: true, messages: [{ role: 'user', content: [image('u0'), image('u1')] }] };
  const ePd: Attempt = { endpoint: pdDp, consumerDpRank: 1 };

  it("names the consumer rank's control address and fresh transfer ids to the encoder, ec_items and the rank to the consumer", async () => {
    const decision = decisionWith([choice(0, e0), choice(1, e0)], [ePd]);
    const ctx = proxyRequest({ body: two, server: serverWith(MOONCAKE), decision });
    const run = new FakeLegRunner((spec) => (spec.stage === 'encode' ? keyedEncoder(spec) : {}));
    const connector = new VllmEpdConnector();
    await connector.prepare(ctx, run);
    expect(run.legs).toEqual([]); // a push connector encodes inside the attempt, for its consumer
    await connector.attempt(ctx, ePd, 0, run);
    const [encode] = run.legsOf('encode');
    const params = encode?.json().ec_transfer_params as { consumer_zmq: string; ec_items: { transfer_id: string }[] };
    expect(params.consumer_zmq).toBe('tcp://10.0.1.6:14580');
    expect(params.ec_items).toEqual([
      { transfer_id: expect.stringMatching(/^[0-9a-f]{32}$/) },
      { transfer_id: expect.stringMatching(/^[0-9a-f]{32}$/) },
    ]);
    const [decode] = run.legsOf('decode');
    expect(decode?.spec.headers).toEqual({ 'X-data-parallel-rank': '1' });
    expect((decode?.json().ec_transfer_params as { ec_items: unknown }).ec_items).toEqual([
      { mm_hash: `h-${sha('u0').slice(0, 8)}`, transfer_id: params.ec_items[0]?.transfer_id },
      { mm_hash: `h-${sha('u1').slice(0, 8)}`, transfer_id: params.ec_items[1]?.transfer_id },
    ]);
  });

  it('re-encodes with new transfer ids after a consumer 500 before the first byte, as often as configured', async () => {
    const decision = decisionWith([choice(0, e0), choice(1, e0)], [ePd]);
    let decodes = 0;
    const run = new FakeLegRunner((spec) =>
      spec.stage === 'encode' ? keyedEncoder(spec) : ++decodes < 3 ? engineError(spec, 500, 'Internal server error') : {},
    );
    const ctx = proxyRequest({ body: two, server: serverWith({ ...MOONCAKE, reencodeAttempts: 2 }), decision });
    await new VllmEpdConnector().attempt(ctx, ePd, 0, run);
    const ids = run
      .legsOf('encode')
      .map((l) => (l.json().ec_transfer_params as { ec_items: { transfer_id: string }[] }).ec_items[0]?.transfer_id);
    expect(ids).toHaveLength(3);
    expect(new Set(ids).size).toBe(3);
    expect(run.legsOf('decode').map((l) => l.spec.endpoint.key)).toEqual([pdDp.key, pdDp.key, pdDp.key]);
    expect(run.retries.map((r) => (r.error as EcHandoffError).reason)).toEqual(['push_timeout', 'push_timeout']);

    const failing = new FakeLegRunner((spec) =>
      spec.stage === 'encode' ? keyedEncoder(spec) : engineError(spec, 500, 'Internal server error'),
    );
    const err = await new VllmEpdConnector()
      .attempt(proxyRequest({ body: two, server: serverWith(MOONCAKE), decision }), ePd, 0, failing)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EcHandoffError);
    expect(err).toMatchObject({
      reason: 'push_timeout',
      retryable: true,
      stage: 'decode',
      message: expect.stringContaining('after 1 re-encode'),
    });
    expect(failing.legsOf('encode')).toHaveLength(2);
    // A 4xx is the request's fault, not a lost push: no re-encode.
    const bad = new FakeLegRunner((spec) => (spec.stage === 'encode' ? keyedEncoder(spec) : engineError(spec, 400, 'bad')));
    await expect(
      new VllmEpdConnector().attempt(proxyRequest({ body: two, server: serverWith(MOONCAKE), decision }), ePd, 0, bad),
    ).rejects.toMatchObject({ status: 400 });
    expect(bad.legsOf('encode')).toHaveLength(1);
  });

  it('re-encodes after a consumer 500 with shared storage and NIXL too, then runs P/D again on the same pods', async () => {
    for (const connector of ['shared-storage', 'nixl'] as const) {
      const decision = decisionWith([choice(0, e0), choice(1, e0)]);
      let prefills = 0;
      const run = new FakeLegRunner((spec) =>
        spec.stage === 'encode' ? keyedEncoder(spec) : spec.stage === 'prefill' && ++prefills === 1 ? engineError(spec, 500) : {},
      );
      const ctx = proxyRequest({ body: two, server: serverWith(ec({ connector })), decision });
      const connectorUnderTest = new VllmEpdConnector();
      await connectorUnderTest.prepare(ctx, run);
      await connectorUnderTest.attempt(ctx, decision.attempts[0], 0, run);
      // One encode before the loop, one after the 500; both P legs on the same pods.
      expect(run.legsOf('encode')).toHaveLength(2);
      expect(run.legsOf('prefill').map((l) => l.spec.endpoint.key)).toEqual([p0.key, p0.key]);
      expect(run.legsOf('decode')).toHaveLength(1);
      expect(run.retries.map((r) => (r.error as EcHandoffError).reason)).toEqual(['output_lost']);
    }
  });

  it('refuses a consumer without a control address for its rank before any encoder runs (retryable: another attempt may have one)', async () => {
    const noAddress: Attempt = { endpoint: d0, prefill: p0 };
    const decision = decisionWith([choice(0, e0), choice(1, e0)], [noAddress]);
    const run = new FakeLegRunner(keyedEncoder);
    const err = await new VllmEpdConnector()
      .attempt(proxyRequest({ body: two, server: serverWith(MOONCAKE), decision }), noAddress, 0, run)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EcHandoffError);
    expect(err).toMatchObject({ reason: 'missing_consumer_address', stage: 'prefill', endpoint: p0.key, retryable: true });
    expect((err as Error).message).toMatch(/^prefill on default\.epd\.p-0 has no EC control address for DP rank 0.*2 media item/);
    expect(run.legs).toEqual([]);
  });

  it('sends text-only requests straight on, with the rank header to a DP>1 consumer only', async () => {
    const text = { model: 'm', messages: [{ role: 'user', content: 'hi' }] };
    const run = new FakeLegRunner();
    await new VllmEpdConnector().attempt(
      proxyRequest({ body: text, server: serverWith(MOONCAKE), decision: decisionWith([], [ePd]) }),
      ePd,
      0,
      run,
    );
    expect(run.legs.map((l) => [l.spec.stage, l.spec.headers])).toEqual([['decode', { 'X-data-parallel-rank': '1' }]]);
    const eppd: Attempt = { endpoint: d0, prefill: { ...p0, dpSize: 2 }, consumerDpRank: 0 };
    const run2 = new FakeLegRunner();
    await new VllmEpdConnector().attempt(proxyRequest({ body: text, server, decision: decisionWith([], [eppd]) }), eppd, 0, run2);
    expect(run2.legs.map((l) => [l.spec.stage, l.spec.headers])).toEqual([
      ['prefill', { 'X-data-parallel-rank': '0' }],
      ['decode', undefined],
    ]);
  });
});
