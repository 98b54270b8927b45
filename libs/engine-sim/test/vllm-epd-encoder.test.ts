import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SimEngineHandle } from '@triad/engine-sim';
import { CHAT, SimFleet } from './helpers';
import {
  audio,
  chat,
  contentUuid,
  embedsRef,
  encoderRequest,
  image,
  QUESTION,
  sha256,
  user,
  video,
  type EcEntry,
  type Part,
} from './epd-shapes';

interface EncoderAnswer {
  readonly ec_transfer_params: Record<string, EcEntry>;
  readonly usage: { completion_tokens: number };
  readonly choices: { finish_reason: string }[];
}

describe('vLLM simulator: encoder and consumers as the newest EPD proxy drives them (shared storage)', () => {
  const fleet = new SimFleet();
  let ecDir: string;
  let encoder: SimEngineHandle;
  let prefill: SimEngineHandle;
  let plain: SimEngineHandle;

  beforeAll(async () => {
    ecDir = mkdtempSync(join(tmpdir(), 'triad-ec-'));
    encoder = await fleet.start({ engine: 'vllm', role: 'encode', host: '127.0.0.40', sharedEcDir: ecDir });
    prefill = await fleet.start({
      engine: 'vllm',
      role: 'both',
      host: '127.0.0.41',
      sharedEcDir: ecDir,
      enableMmEmbeds: true,
      dataParallel: 2,
    });
    plain = await fleet.start({ engine: 'vllm', role: 'both', host: '127.0.0.42', sharedEcDir: ecDir });
  });
  afterAll(async () => {
    await fleet.closeAll();
    rmSync(ecDir, { recursive: true, force: true });
  });

  async function encode(body: object): Promise<EncoderAnswer> {
    const res = await chat(encoder, body);
    expect(res.status).toBe(200);
    return res.json<EncoderAnswer>();
  }

  it('encodes a batch without max_tokens: one entry per distinct item, a repeat listed once with both positions', async () => {
    const [a, b] = [image('https://example.com/batch/a.png'), image('https://example.com/batch/b.png')];
    const before = encoder.counters();
    const answer = await encode(encoderRequest([a, b, a]));
    expect(answer.choices[0].finish_reason).toBe('length');
    expect(answer.usage.completion_tokens).toBe(1);
    expect(answer.ec_transfer_params).toEqual({
      [contentUuid(a)]: { metadata: { image_grid_thw: [[1, 32, 32]] }, item_indices: [0, 2] },
      [contentUuid(b)]: { metadata: { image_grid_thw: [[1, 32, 32]] }, item_indices: [1] },
    });
    expect(existsSync(join(ecDir, contentUuid(a), 'encoder_cache.safetensors'))).toBe(true);
    const after = encoder.counters();
    expect(after['encoderRequests'] - before['encoderRequests']).toBe(1);
    expect(after['encoderItems'] - before['encoderItems']).toBe(3);
    expect(after['encodes'] - before['encodes']).toBe(2);
  });

  it('reports the placeholder metadata of audio, input audio and video items', async () => {
    const clip = audio('https://example.com/a.wav');
    const film = video('https://example.com/v.mp4');
    const raw = { type: 'input_audio', input_audio: { data: 'UklGRg==', format: 'wav' }, uuid: 'clip-7' };
    const metadataOf = async (part: Part, key: string) => (await encode(encoderRequest([part]))).ec_transfer_params[key].metadata;
    expect(await metadataOf(clip, contentUuid(clip))).toEqual({ audio_feature_lengths: [128] });
    expect(await metadataOf(film, contentUuid(film))).toEqual({ video_grid_thw: [[4, 32, 32]] });
    expect(await metadataOf(raw, 'clip-7')).toEqual({ audio_feature_lengths: [128] });
  });

  it('hashes mm_processor_kwargs and media_io_kwargs into the identifier; empty kwargs change nothing', async () => {
    const cat = image('https://example.com/kw/cat.png', { uuid: 'kw-cat' });
    const keyOf = async (extra: Part) => Object.keys((await encode(encoderRequest([cat], extra))).ec_transfer_params)[0];
    const plainKey = await keyOf({});
    const pixels = await keyOf({ mm_processor_kwargs: { max_pixels: 262144 } });
    const mode = await keyOf({ media_io_kwargs: { image: { image_mode: 'RGB' } } });
    expect(plainKey).toBe('kw-cat');
    expect(await keyOf({ mm_processor_kwargs: {}, media_io_kwargs: {} })).toBe('kw-cat');
    expect(pixels).toMatch(/^[0-9a-f]{64}$/);
    expect(new Set([plainKey, pixels, mode]).size).toBe(3);
    expect(await keyOf({ mm_processor_kwargs: { max_pixels: 262144 } })).toBe(pixels);
  });

  it('a consumer finds the item only under the same kwargs; a metadata reference it cannot find fails the request', async () => {
    const dog = image('https://example.com/kw/dog.png');
    const kwargs = { mm_processor_kwargs: { max_pixels: 262144 } };
    const entry = Object.values((await encode(encoderRequest([dog], kwargs))).ec_transfer_params)[0];
    const ref = embedsRef(dog, entry);
    const body = (extra: object) => ({ model: 'sim-model', messages: user(QUESTION, ref), max_tokens: 3, ...extra });
    const before = prefill.counters();
    expect((await chat(prefill, body(kwargs))).status).toBe(200);
    expect(prefill.counters()['ecHits'] - before['ecHits']).toBe(1);
    const miss = await chat(prefill, body({}));
    expect(miss.status).toBe(500);
    expect(miss.json()).toEqual({ error: { message: 'Internal server error', type: 'InternalServerError', param: null, code: 500 } });
    // The same item as media, without the kwargs: a different key, so a local encode.
    const raw = await chat(prefill, { model: 'sim-model', messages: [{ role: 'user', content: [QUESTION, dog] }], max_tokens: 3 });
    expect(raw.status).toBe(200);
    const after = prefill.counters();
    expect(after['localEncodes'] - before['localEncodes']).toBe(1);
    expect(after['ecRequestsFailed'] - before['ecRequestsFailed']).toBe(1);
  });

  it("rejects *_embeds parts with vLLM's 400 unless started with enableMmEmbeds", async () => {
    for (const type of ['image_embeds', 'audio_embeds', 'video_embeds']) {
      const res = await chat(plain, { messages: [{ role: 'user', content: [{ type, [type]: {}, uuid: 'x' }] }] });
      expect(res.status).toBe(400);
      const message = `You must set \`--enable-mm-embeds\` to input \`${type}\``;
      expect(res.json()).toEqual({ error: { message, type: 'BadRequestError', param: type, code: 400 } });
    }
  });

  it("sizes a metadata reference's placeholder range from its grid and counts the embeds parts", async () => {
    const grid = async (thw: number[], uuid: string) => {
      await encode(encoderRequest([image(`https://example.com/grid/${uuid}.png`, { uuid })]));
      const ref = { type: 'image_embeds', image_embeds: { image_grid_thw: thw }, uuid };
      const res = await chat(prefill, { messages: user(ref), max_tokens: 1 });
      expect(res.status).toBe(200);
      return res.json<{ usage: { prompt_tokens: number } }>().usage.prompt_tokens;
    };
    const before = prefill.counters()['embedsParts'];
    expect((await grid([1, 64, 64], 'big')) - (await grid([1, 32, 32], 'small'))).toBe(1024 - 256);
    expect(prefill.counters()['embedsParts'] - before).toBe(2);
    const bad = await chat(prefill, { messages: user({ type: 'image_embeds', image_embeds: { image_grid_thw: [1, 'x'] }, uuid: 'u' }) });
    expect(bad.status).toBe(400);
    expect(bad.json()).toMatchObject({ error: { param: 'image_embeds', message: expect.stringContaining('image_grid_thw') } });
  });

  it('honours X-data-parallel-rank, records the rank that served, and rejects a rank out of range as vLLM does', async () => {
    const before = prefill.counters();
    expect((await chat(prefill, { messages: CHAT, max_tokens: 1 }, { 'x-data-parallel-rank': '1' })).status).toBe(200);
    const after = prefill.counters();
    expect(after['dpRank1Requests'] - before['dpRank1Requests']).toBe(1);
    expect(after['dpRank0Requests']).toBe(before['dpRank0Requests']);
    expect(after['dpRankPinned'] - before['dpRankPinned']).toBe(1);
    const out = await chat(prefill, { messages: CHAT }, { 'x-data-parallel-rank': '2' });
    expect(out.status).toBe(400);
    expect(out.json()).toMatchObject({ error: { message: 'data_parallel_rank 2 is out of range [0, 2).' } });
    expect((await chat(prefill, { messages: CHAT }, { 'x-data-parallel-rank': 'one' })).status).toBe(400);
  });

  it.each([
    ['mm_processor_kwargs that is not a dict', { mm_processor_kwargs: 'max_pixels=1' }, 'mm_processor_kwargs'],
    ['ec_transfer_params that is not a dict', { ec_transfer_params: ['x'] }, 'ec_transfer_params'],
  ])('rejects %s with 400', async (_name, extra, param) => {
    const res = await chat(prefill, { messages: user(image(`https://example.com/${sha256(param)}.png`)), ...extra });
    expect(res.status).toBe(400);
    expect(res.json()).toMatchObject({ error: { param } });
  });
});
