import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SimEngineHandle } from '@triad/engine-sim';
import { waitFor } from '@triad/testing';
import { CHAT, get, post, SimFleet } from './helpers';

/** What vLLM's toy NIXL proxy puts into the prefill request. */
const PREFILL_KV = {
  do_remote_decode: true,
  do_remote_prefill: false,
  remote_engine_id: null,
  remote_block_ids: null,
  remote_host: null,
  remote_port: null,
};

const IMAGE_A = { type: 'image_url', image_url: { url: 'https://example.com/cat.png' } };
const IMAGE_B = { type: 'image_url', image_url: { url: 'https://example.com/dog.png' } };
const withImage = (image: object) => [{ role: 'user', content: [{ type: 'text', text: 'What is in this picture?' }, image] }];

describe('vLLM simulator: KV a prefill holds for remote decodes', () => {
  const fleet = new SimFleet();
  let prefill: SimEngineHandle;
  let brief: SimEngineHandle;
  let decode: SimEngineHandle;

  beforeAll(async () => {
    // `prefill` holds its blocks for a minute, so nothing the test reads races the lease on a loaded machine;
    // `brief` is the one whose lease is meant to end.
    prefill = await fleet.start({ engine: 'vllm', role: 'prefill', host: '127.0.0.3', kvLeaseMs: 60_000 });
    brief = await fleet.start({ engine: 'vllm', role: 'prefill', host: '127.0.0.3', kvLeaseMs: 200 });
    decode = await fleet.start({ engine: 'vllm', role: 'decode', host: '127.0.0.4' });
  });
  afterAll(() => fleet.closeAll());

  const heldOnMetrics = async (sim: SimEngineHandle = prefill) => {
    const text = (await get(`${sim.url}/metrics`)).text;
    const value = (name: string) => Number(new RegExp(`^${name}\\{[^}]*\\} (\\S+)$`, 'm').exec(text)?.[1]);
    return { requests: value('triad_sim_kv_held_requests'), blocks: value('triad_sim_kv_held_blocks') };
  };

  it("keeps each prefill's blocks (a retried prefill of the same request too) until a decode reads them or the lease ends", async () => {
    const params: Record<string, unknown>[] = [];
    for (let i = 0; i < 2; i++) {
      const res = await post(
        `${prefill.url}/v1/chat/completions`,
        { messages: CHAT, max_tokens: 1, stream: false, kv_transfer_params: PREFILL_KV },
        { 'x-request-id': 'held-1' },
      );
      params.push(res.json<{ kv_transfer_params: Record<string, unknown> }>().kv_transfer_params);
    }
    const perRequest = (params[0]['remote_block_ids'] as number[]).length;
    expect(prefill.kvHeld()).toEqual({ requests: 2, blocks: 2 * perRequest });
    expect(await heldOnMetrics()).toEqual({ requests: 2, blocks: 2 * perRequest });
    // The decode reads the second set: only the first stays held, then its lease ends.
    const res = await post(
      `${decode.url}/v1/chat/completions`,
      { messages: CHAT, max_tokens: 2, kv_transfer_params: params[1] },
      { 'x-request-id': 'held-1' },
    );
    expect(res.status).toBe(200);
    expect(prefill.kvHeld()).toEqual({ requests: 1, blocks: perRequest });
    expect(await heldOnMetrics()).toEqual({ requests: 1, blocks: perRequest });
    expect(prefill.counters()['kvLeasesExpired']).toBe(0);
    // Blocks no decode reads are freed when their lease ends.
    const unread = await post(`${brief.url}/v1/chat/completions`, {
      messages: CHAT,
      max_tokens: 1,
      stream: false,
      kv_transfer_params: PREFILL_KV,
    });
    expect(unread.status).toBe(200);
    await waitFor(() => brief.kvHeld().requests === 0, { what: 'the lease to end' });
    expect(brief.counters()['kvLeasesExpired']).toBe(1);
    expect(await heldOnMetrics(brief)).toEqual({ requests: 0, blocks: 0 });
  });
});

describe('vLLM simulator: NIXL prefill/decode hand-off', () => {
  const fleet = new SimFleet();
  let prefill: SimEngineHandle;
  let decode: SimEngineHandle;

  let strict: SimEngineHandle;

  beforeAll(async () => {
    prefill = await fleet.start({ engine: 'vllm', role: 'prefill', host: '127.0.0.3' });
    decode = await fleet.start({ engine: 'vllm', role: 'decode', host: '127.0.0.4', kvLoadFailurePolicy: 'recompute' });
    // vLLM's default kv_load_failure_policy: a failed load fails the request.
    strict = await fleet.start({ engine: 'vllm', role: 'decode', host: '127.0.0.14' });
  });
  afterAll(() => fleet.closeAll());

  async function prefillFor(requestId: string): Promise<Record<string, unknown>> {
    const res = await post(
      `${prefill.url}/v1/chat/completions`,
      { messages: CHAT, max_tokens: 1, stream: false, kv_transfer_params: PREFILL_KV },
      { 'x-request-id': requestId },
    );
    expect(res.status).toBe(200);
    const body = res.json<{
      kv_transfer_params: Record<string, unknown>;
      usage: { completion_tokens: number };
      choices: { finish_reason: string }[];
    }>();
    expect(body.usage.completion_tokens).toBe(1);
    expect(body.choices[0].finish_reason).toBe('length');
    return body.kv_transfer_params;
  }

  it('prefill answers 1 token plus kv_transfer_params naming its side channel', async () => {
    const kv = await prefillFor('handoff-0');
    expect(kv).toMatchObject({
      do_remote_prefill: true,
      do_remote_decode: false,
      remote_request_id: 'handoff-0',
      remote_host: '127.0.0.3',
      remote_port: prefill.port,
      tp_size: 1,
    });
    expect(typeof kv['remote_engine_id']).toBe('string');
    expect(Array.isArray(kv['remote_block_ids'])).toBe(true);
  });

  it('decode pulls the blocks from the named prefill: a real hand-off, counted on both sides', async () => {
    const before = {
      served: prefill.counters()['kvPullsServed'],
      received: decode.counters()['kvPullsReceived'],
      fallbacks: decode.counters()['localPrefillFallbacks'],
    };
    const kv = await prefillFor('handoff-1');
    const res = await post(
      `${decode.url}/v1/chat/completions`,
      { messages: CHAT, max_tokens: 6, kv_transfer_params: kv },
      { 'x-request-id': 'handoff-1' },
    );
    expect(res.status).toBe(200);
    expect(res.json()).toMatchObject({ id: 'chatcmpl-handoff-1', usage: { completion_tokens: 6 }, kv_transfer_params: null });
    expect(prefill.counters()['kvPullsServed']).toBe(before.served + 1);
    expect(decode.counters()['kvPullsReceived']).toBe(before.received + 1);
    expect(decode.counters()['localPrefillFallbacks']).toBe(before.fallbacks);
    // The side channel carried the params the decode was given (what a router must pass verbatim).
    const pull = prefill
      .requests()
      .find((r) => r.path === '/sim/nixl/pull' && (r.body as { remote_request_id?: string }).remote_request_id === 'handoff-1');
    expect(pull?.body).toEqual({
      remote_engine_id: kv['remote_engine_id'],
      remote_request_id: 'handoff-1',
      remote_block_ids: kv['remote_block_ids'],
    });
  });

  it('streams from decode after a hand-off', async () => {
    const kv = await prefillFor('handoff-2');
    const res = await post(
      `${decode.url}/v1/chat/completions`,
      { messages: CHAT, max_tokens: 3, stream: true, kv_transfer_params: kv },
      { 'x-request-id': 'handoff-2' },
    );
    expect(res.text.endsWith('data: [DONE]\n\n')).toBe(true);
    expect(
      prefill
        .requests()
        .some((r) => r.path === '/sim/nixl/pull' && (r.body as { remote_request_id?: string }).remote_request_id === 'handoff-2'),
    ).toBe(true);
  });

  it('counts a silent local prefill when decode gets no kv_transfer_params', async () => {
    const before = decode.counters()['localPrefillFallbacks'];
    const res = await post(`${decode.url}/v1/chat/completions`, { messages: CHAT, max_tokens: 2 });
    expect(res.status).toBe(200);
    expect(decode.counters()['localPrefillFallbacks']).toBe(before + 1);
  });

  it('with kv_load_failure_policy recompute, prefills locally (counted as a failed pull) when the blocks were already read or the ids are wrong', async () => {
    const kv = await prefillFor('handoff-3');
    await post(`${decode.url}/v1/chat/completions`, { messages: CHAT, max_tokens: 2, kv_transfer_params: kv });
    const before = {
      failures: decode.counters()['kvPullFailures'],
      fallbacks: decode.counters()['localPrefillFallbacks'],
      rejected: prefill.counters()['kvPullsRejected'],
    };
    const again = await post(`${decode.url}/v1/chat/completions`, { messages: CHAT, max_tokens: 2, kv_transfer_params: kv });
    expect(again.status).toBe(200);
    const kv4 = await prefillFor('handoff-4');
    await post(`${decode.url}/v1/chat/completions`, {
      messages: CHAT,
      max_tokens: 2,
      kv_transfer_params: { ...kv4, remote_engine_id: 'someone-else' },
    });
    expect(decode.counters()['kvPullFailures']).toBe(before.failures + 2);
    expect(decode.counters()['localPrefillFallbacks']).toBe(before.fallbacks + 2);
    expect(prefill.counters()['kvPullsRejected']).toBe(before.rejected + 2);
  });

  it('with the default kv_load_failure_policy fail, a failed pull fails the request: 500, or an error event once streaming', async () => {
    const kv = await prefillFor('handoff-5');
    await post(`${strict.url}/v1/chat/completions`, { messages: CHAT, max_tokens: 2, kv_transfer_params: kv });
    const before = { failed: strict.counters()['kvLoadFailedRequests'], fallbacks: strict.counters()['localPrefillFallbacks'] };
    const again = await post(`${strict.url}/v1/chat/completions`, { messages: CHAT, max_tokens: 2, kv_transfer_params: kv });
    expect(again.status).toBe(500);
    const streamed = await post(`${strict.url}/v1/chat/completions`, {
      messages: CHAT,
      max_tokens: 2,
      stream: true,
      kv_transfer_params: kv,
    });
    expect(streamed.status).toBe(200);
    expect(streamed.text).toMatch(/^data: \{"error":/);
    expect(streamed.text.endsWith('data: [DONE]\n\n')).toBe(true);
    expect(strict.counters()['kvLoadFailedRequests']).toBe(before.failed + 2);
    expect(strict.counters()['localPrefillFallbacks']).toBe(before.fallbacks);
  });

  it('computes the prompt itself for params it cannot use ("Got invalid KVTransferParams"), whatever the policy', async () => {
    const before = { invalid: strict.counters()['kvParamsInvalid'], fallbacks: strict.counters()['localPrefillFallbacks'] };
    const res = await post(`${strict.url}/v1/chat/completions`, {
      messages: CHAT,
      max_tokens: 1,
      kv_transfer_params: { do_remote_prefill: true },
    });
    expect(res.status).toBe(200);
    expect(strict.counters()['kvParamsInvalid']).toBe(before.invalid + 1);
    expect(strict.counters()['localPrefillFallbacks']).toBe(before.fallbacks + 1);
  });

  it('with kv_load_failure_policy recompute, treats unreachable or malformed params as a local prefill, not an error', async () => {
    const before = decode.counters()['localPrefillFallbacks'];
    const dead = {
      do_remote_prefill: true,
      remote_engine_id: 'x',
      remote_block_ids: [1],
      remote_host: '127.0.0.1',
      remote_port: 1,
      remote_request_id: 'x',
    };
    expect((await post(`${decode.url}/v1/chat/completions`, { messages: CHAT, max_tokens: 1, kv_transfer_params: dead })).status).toBe(200);
    expect(
      (await post(`${decode.url}/v1/chat/completions`, { messages: CHAT, max_tokens: 1, kv_transfer_params: { do_remote_prefill: true } }))
        .status,
    ).toBe(200);
    expect(decode.counters()['localPrefillFallbacks']).toBe(before + 2);
  });
});

describe('vLLM simulator: NIXL pulls in-process (nixlSideChannel: in-process)', () => {
  const fleet = new SimFleet();
  let prefill: SimEngineHandle;
  let decode: SimEngineHandle;
  let httpPrefill: SimEngineHandle;

  beforeAll(async () => {
    prefill = await fleet.start({ engine: 'vllm', role: 'prefill', host: '127.0.0.5', nixlSideChannel: 'in-process' });
    decode = await fleet.start({
      engine: 'vllm',
      role: 'decode',
      host: '127.0.0.6',
      nixlSideChannel: 'in-process',
      kvLoadFailurePolicy: 'recompute',
    });
    // A prefill that did not opt in: the same decode pulls from it over HTTP.
    httpPrefill = await fleet.start({ engine: 'vllm', role: 'prefill', host: '127.0.0.7' });
  });
  afterAll(() => fleet.closeAll());

  async function prefillOn(sim: SimEngineHandle, requestId: string): Promise<Record<string, unknown>> {
    const res = await post(
      `${sim.url}/v1/chat/completions`,
      { messages: CHAT, max_tokens: 1, stream: false, kv_transfer_params: PREFILL_KV },
      { 'x-request-id': requestId },
    );
    return res.json<{ kv_transfer_params: Record<string, unknown> }>().kv_transfer_params;
  }

  it('hands off without an HTTP exchange: same checks, counted on both sides and as in-process', async () => {
    const kv = await prefillOn(prefill, 'inproc-1');
    const res = await post(
      `${decode.url}/v1/chat/completions`,
      { messages: CHAT, max_tokens: 4, kv_transfer_params: kv },
      { 'x-request-id': 'inproc-1' },
    );
    expect(res.json()).toMatchObject({ id: 'chatcmpl-inproc-1', usage: { completion_tokens: 4 } });
    expect(prefill.counters()).toMatchObject({ kvPullsServed: 1, kvPullsRejected: 0 });
    expect(decode.counters()).toMatchObject({ kvPullsReceived: 1, kvPullsInProcess: 1, kvPullFailures: 0, localPrefillFallbacks: 0 });
    expect(prefill.requests().some((r) => r.path === '/sim/nixl/pull')).toBe(false);
  });

  it('rejects blocks already read or with the wrong engine id, as the HTTP side channel does', async () => {
    const kv = await prefillOn(prefill, 'inproc-2');
    await post(`${decode.url}/v1/chat/completions`, { messages: CHAT, max_tokens: 2, kv_transfer_params: kv });
    const before = {
      failures: decode.counters()['kvPullFailures'],
      fallbacks: decode.counters()['localPrefillFallbacks'],
      rejected: prefill.counters()['kvPullsRejected'],
    };
    expect((await post(`${decode.url}/v1/chat/completions`, { messages: CHAT, max_tokens: 2, kv_transfer_params: kv })).status).toBe(200);
    const kv3 = await prefillOn(prefill, 'inproc-3');
    await post(`${decode.url}/v1/chat/completions`, {
      messages: CHAT,
      max_tokens: 2,
      kv_transfer_params: { ...kv3, remote_engine_id: 'someone-else' },
    });
    expect(decode.counters()['kvPullFailures']).toBe(before.failures + 2);
    expect(decode.counters()['localPrefillFallbacks']).toBe(before.fallbacks + 2);
    expect(prefill.counters()['kvPullsRejected']).toBe(before.rejected + 2);
  });

  it('pulls over HTTP from a prefill that does not offer in-process pulls', async () => {
    const inProcess = decode.counters()['kvPullsInProcess'];
    const kv = await prefillOn(httpPrefill, 'inproc-4');
    await post(
      `${decode.url}/v1/chat/completions`,
      { messages: CHAT, max_tokens: 2, kv_transfer_params: kv },
      { 'x-request-id': 'inproc-4' },
    );
    expect(httpPrefill.counters()['kvPullsServed']).toBe(1);
    expect(httpPrefill.requests().some((r) => r.path === '/sim/nixl/pull')).toBe(true);
    expect(decode.counters()['kvPullsInProcess']).toBe(inProcess);
  });

  it('a closed prefill no longer answers in-process pulls', async () => {
    const kv = await prefillOn(prefill, 'inproc-5');
    await prefill.close();
    const before = decode.counters()['localPrefillFallbacks'];
    expect((await post(`${decode.url}/v1/chat/completions`, { messages: CHAT, max_tokens: 2, kv_transfer_params: kv })).status).toBe(200);
    expect(decode.counters()['localPrefillFallbacks']).toBe(before + 1);
  });
});

describe('vLLM simulator: EPD with the shared-storage EC connector', () => {
  const fleet = new SimFleet();
  let ecDir: string;
  let encoder: SimEngineHandle;
  let prefill: SimEngineHandle;
  let decode: SimEngineHandle;

  beforeAll(async () => {
    ecDir = mkdtempSync(join(tmpdir(), 'triad-ec-'));
    encoder = await fleet.start({ engine: 'vllm', role: 'encode', host: '127.0.0.5', sharedEcDir: ecDir });
    prefill = await fleet.start({ engine: 'vllm', role: 'prefill', host: '127.0.0.5', sharedEcDir: ecDir });
    decode = await fleet.start({ engine: 'vllm', role: 'decode', host: '127.0.0.5' });
  });
  afterAll(async () => {
    await fleet.closeAll();
    rmSync(ecDir, { recursive: true, force: true });
  });

  it('encoder writes the item to the EC store and answers its entry keyed by identifier', async () => {
    const res = await post(
      `${encoder.url}/v1/chat/completions`,
      { model: 'sim-model', messages: [{ role: 'user', content: [IMAGE_A] }], max_tokens: 1, stream: false },
      { 'x-request-id': 'p:0:abcdef' },
    );
    expect(res.status).toBe(200);
    const body = res.json<{ ec_transfer_params: Record<string, unknown>; usage: { completion_tokens: number } }>();
    expect(body).toMatchObject({ object: 'chat.completion', id: 'chatcmpl-p:0:abcdef', usage: { completion_tokens: 1 } });
    const keys = Object.keys(body.ec_transfer_params);
    expect(keys).toEqual([expect.stringMatching(/^[0-9a-f]{64}$/)]);
    expect(body.ec_transfer_params[keys[0]]).toEqual({ metadata: { image_grid_thw: [[1, 32, 32]] }, item_indices: [0] });
    expect(existsSync(join(ecDir, keys[0], 'encoder_cache.safetensors'))).toBe(true);
    expect(encoder.counters()).toMatchObject({ encodes: 1, ecWrites: 1, encoderRequests: 1, encoderItems: 1 });
  });

  it('uses the part uuid as the key when one is given', async () => {
    const res = await post(`${encoder.url}/v1/chat/completions`, {
      messages: [{ role: 'user', content: [{ ...IMAGE_B, uuid: 'dog-1' }] }],
    });
    expect(res.json()).toMatchObject({ ec_transfer_params: { 'dog-1': { item_indices: [0] } } });
    expect(readdirSync(ecDir)).toContain('dog-1');
  });

  it.each([
    ['text next to the item', [{ role: 'user', content: [{ type: 'text', text: 'hi' }, IMAGE_A] }]],
    ['no item', CHAT],
  ])('encoder rejects %s with 400', async (_name, messages) => {
    const res = await post(`${encoder.url}/v1/chat/completions`, { messages, max_tokens: 1 });
    expect(res.status).toBe(400);
    expect(res.json()).toMatchObject({ error: { type: 'BadRequestError', code: 400 } });
  });

  it('prefill (EC consumer) hits the cache for an encoded item and misses for a new one', async () => {
    const before = prefill.counters();
    await post(`${prefill.url}/v1/chat/completions`, { messages: withImage(IMAGE_A), max_tokens: 1 });
    expect(prefill.counters()['ecHits']).toBe(before['ecHits'] + 1);
    await post(`${prefill.url}/v1/chat/completions`, {
      messages: withImage({ type: 'image_url', image_url: { url: 'https://example.com/never-encoded.png' } }),
      max_tokens: 1,
    });
    expect(prefill.counters()['ecMisses']).toBe(before['ecMisses'] + 1);
    const metrics = await (await fetch(`${prefill.url}/metrics`)).text();
    expect(metrics).toMatch(/^vllm:mm_cache_queries_total\{model_name="sim-model",engine="0"\} 2\.0$/m);
    expect(metrics).toMatch(/^vllm:mm_cache_hits_total\{model_name="sim-model",engine="0"\} 1\.0$/m);
  });

  it('runs E -> P -> D end to end: encode, prefill with EC hit and KV hand-off, decode pulls', async () => {
    const messages = withImage({ type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } });
    const item = messages[0].content[1];
    await post(`${encoder.url}/v1/chat/completions`, {
      model: 'sim-model',
      messages: [{ role: 'user', content: [item] }],
      max_tokens: 1,
      stream: false,
    });
    const hits = prefill.counters()['ecHits'];
    const p = await post(
      `${prefill.url}/v1/chat/completions`,
      { model: 'sim-model', messages, max_tokens: 1, stream: false, kv_transfer_params: PREFILL_KV },
      { 'x-request-id': 'epd-1' },
    );
    expect(prefill.counters()['ecHits']).toBe(hits + 1);
    const kv = p.json<{ kv_transfer_params: unknown }>().kv_transfer_params;
    const received = decode.counters()['kvPullsReceived'];
    const d = await post(
      `${decode.url}/v1/chat/completions`,
      { model: 'sim-model', messages, max_tokens: 5, stream: true, kv_transfer_params: kv },
      { 'x-request-id': 'epd-1' },
    );
    expect(d.text.endsWith('data: [DONE]\n\n')).toBe(true);
    expect(decode.counters()['kvPullsReceived']).toBe(received + 1);
  });
});
