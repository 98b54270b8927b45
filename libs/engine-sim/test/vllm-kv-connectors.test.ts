import type { SimEngineHandle } from '@triad/engine-sim';
import { waitFor } from '@triad/testing';
import { get, post, SimFleet } from './helpers';

// Long enough that a prefill leg matters (about 1,000 simulated tokens).
const LONG = [{ role: 'user', content: `Summarise this report. ${'The quarterly numbers moved in every region. '.repeat(90)}` }];
const NIXL_PREFILL_KV = {
  do_remote_decode: true,
  do_remote_prefill: false,
  remote_engine_id: null,
  remote_block_ids: null,
  remote_host: null,
  remote_port: null,
};

type Query = Record<string, { engine_id: string; worker_addr: Record<string, Record<string, string>> }>;

describe("vLLM simulator: upstream vLLM's MooncakeConnector", () => {
  const fleet = new SimFleet();
  let prefill: SimEngineHandle;
  let decode: SimEngineHandle;
  let recompute: SimEngineHandle;
  let bootstrap: string;
  let engineIds: string[];

  beforeAll(async () => {
    const mooncake = { engine: 'vllm', kvConnector: 'mooncake', kvLeaseMs: 1500 } as const;
    prefill = await fleet.start({ ...mooncake, role: 'prefill', host: '127.0.3.1', dataParallel: 2 });
    decode = await fleet.start({ ...mooncake, role: 'decode', host: '127.0.3.2' });
    recompute = await fleet.start({ ...mooncake, role: 'decode', host: '127.0.3.3', kvLoadFailurePolicy: 'recompute' });
    bootstrap = `http://${prefill.host}:${prefill.bootstrapPort}`;
    const query = (await get(`${bootstrap}/query`)).json<Query>();
    engineIds = [query['0'].engine_id, query['1'].engine_id];
  });
  afterAll(() => fleet.closeAll());

  const prefillBody = (transferId?: string) => ({
    messages: LONG,
    max_tokens: 1,
    stream: false,
    kv_transfer_params: { do_remote_decode: true, do_remote_prefill: false, ...(transferId ? { transfer_id: transferId } : {}) },
  });
  const decodeParams = (transferId: string, engineId: string) => ({
    do_remote_decode: false,
    do_remote_prefill: true,
    remote_bootstrap_addr: bootstrap,
    remote_engine_id: engineId,
    transfer_id: transferId,
  });

  it("serves the bootstrap server's /query: an engine id and worker address per DP rank", async () => {
    const query = (await get(`${bootstrap}/query`)).json<Query>();
    expect(Object.keys(query)).toEqual(['0', '1']);
    expect(query['0'].engine_id).not.toBe(query['1'].engine_id);
    expect(query['0'].worker_addr['0']['0']).toMatch(/^tcp:\/\/127\.0\.3\.1:\d+$/);
  });

  it('hands off when P and D are called concurrently: the decode loads the KV, the prefill answers without params', async () => {
    const before = { served: prefill.counters()['kvPullsServed'], received: decode.counters()['kvPullsReceived'] };
    const [d, p] = await Promise.all([
      post(`${decode.url}/v1/chat/completions`, {
        messages: LONG,
        max_tokens: 3,
        kv_transfer_params: decodeParams('xfer-a', engineIds[1]),
      }),
      post(`${prefill.url}/v1/chat/completions`, prefillBody('xfer-a'), { 'x-data-parallel-rank': '1' }),
    ]);
    expect(p.json()).toMatchObject({ usage: { completion_tokens: 1 }, kv_transfer_params: null });
    expect(d.json()).toMatchObject({ usage: { completion_tokens: 3 } });
    expect(prefill.counters()['kvPullsServed']).toBe(before.served + 1);
    expect(decode.counters()['kvPullsReceived']).toBe(before.received + 1);
    expect(decode.counters()['localPrefillFallbacks']).toBe(0);
    expect(prefill.kvHeld().requests).toBe(0);
  });

  it('without a transfer_id the prefill frees the KV and answers no params, so a sequential decode prefills it all again', async () => {
    const p = await post(`${prefill.url}/v1/chat/completions`, { ...prefillBody(), kv_transfer_params: NIXL_PREFILL_KV });
    expect(p.json()).toMatchObject({ kv_transfer_params: null });
    expect(prefill.counters()['kvTransferIdsMissing']).toBe(1);
    expect(prefill.kvHeld().requests).toBe(0);
    const before = decode.counters()['localPrefillFallbacks'];
    const d = await post(`${decode.url}/v1/chat/completions`, { messages: LONG, max_tokens: 2 });
    expect(d.status).toBe(200);
    expect(decode.counters()['localPrefillFallbacks']).toBe(before + 1);
  });

  it('takes NIXL-shaped params as invalid (no bootstrap address or transfer id): the decode computes the prompt', async () => {
    const before = { invalid: decode.counters()['kvParamsInvalid'], fallbacks: decode.counters()['localPrefillFallbacks'] };
    const kv = {
      do_remote_prefill: true,
      do_remote_decode: false,
      remote_engine_id: 'e',
      remote_block_ids: [1],
      remote_host: 'h',
      remote_port: 1,
    };
    const d = await post(`${decode.url}/v1/chat/completions`, { messages: LONG, max_tokens: 2, kv_transfer_params: kv });
    expect(d.status).toBe(200);
    expect(decode.counters()['kvParamsInvalid']).toBe(before.invalid + 1);
    expect(decode.counters()['localPrefillFallbacks']).toBe(before.fallbacks + 1);
  });

  it('fails the load for an engine id the bootstrap server does not list: a 500 by default, a counted local prefill with recompute', async () => {
    const d = await post(`${decode.url}/v1/chat/completions`, {
      messages: LONG,
      max_tokens: 2,
      kv_transfer_params: decodeParams('xfer-b', 'gone'),
    });
    expect(d.status).toBe(500);
    expect(decode.counters()['kvLoadFailedRequests']).toBe(1);
    const r = await post(`${recompute.url}/v1/chat/completions`, {
      messages: LONG,
      max_tokens: 2,
      kv_transfer_params: decodeParams('xfer-c', 'gone'),
    });
    expect(r.status).toBe(200);
    expect(recompute.counters()).toMatchObject({ kvPullFailures: 1, localPrefillFallbacks: 1, kvLoadFailedRequests: 0 });
    expect(recompute.counters()['bootstrapQueries']).toBeGreaterThanOrEqual(1);
  });

  it('keys a transfer by the DP rank that computed it: a decode naming another rank waits until the timeout', async () => {
    const [d] = await Promise.all([
      post(`${decode.url}/v1/chat/completions`, {
        messages: LONG,
        max_tokens: 2,
        kv_transfer_params: decodeParams('xfer-d', engineIds[0]),
      }),
      post(`${prefill.url}/v1/chat/completions`, prefillBody('xfer-d'), { 'x-data-parallel-rank': '1' }),
    ]);
    expect(d.status).toBe(500);
    // The prefill kept the KV of rank 1 for a decode that never asked for it, until its timeout.
    await waitFor(() => prefill.kvHeld().requests === 0, { what: 'the unclaimed transfer to expire' });
  });

  it('sends the KV to a decode whose client left after it asked: the prefill holds nothing afterwards', async () => {
    const abort = new AbortController();
    const d = fetch(`${decode.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ messages: LONG, max_tokens: 50, stream: true, kv_transfer_params: decodeParams('xfer-e', engineIds[0]) }),
      signal: abort.signal,
    });
    // The stream opens (headers) once the decode starts waiting for its KV.
    const opened = await d;
    expect(opened.status).toBe(200);
    const served = prefill.counters()['kvPullsServed'];
    abort.abort();
    await opened.body?.cancel().catch(() => undefined);
    await post(`${prefill.url}/v1/chat/completions`, prefillBody('xfer-e'), { 'x-data-parallel-rank': '0' });
    await waitFor(() => prefill.counters()['kvPullsServed'] === served + 1, { what: 'the transfer to be taken' });
    expect(prefill.kvHeld().requests).toBe(0);
  });
});

describe("vLLM simulator: vllm-ascend's MooncakeConnector (NIXL-like, no bootstrap server)", () => {
  const fleet = new SimFleet();
  let prefill: SimEngineHandle;
  let decode: SimEngineHandle;

  beforeAll(async () => {
    prefill = await fleet.start({ engine: 'vllm', role: 'prefill', host: '127.0.3.4', kvConnector: 'mooncake-ascend' });
    decode = await fleet.start({ engine: 'vllm', role: 'decode', host: '127.0.3.5', kvConnector: 'mooncake-ascend' });
  });
  afterAll(() => fleet.closeAll());

  it('runs no bootstrap server, returns params naming its blocks, and the decode reads them', async () => {
    expect(prefill.bootstrapPort).toBeUndefined();
    const p = await post(
      `${prefill.url}/v1/chat/completions`,
      { messages: LONG, max_tokens: 1, stream: false, kv_transfer_params: NIXL_PREFILL_KV },
      { 'x-request-id': 'asc-1' },
    );
    const kv = p.json<{ kv_transfer_params: Record<string, unknown> }>().kv_transfer_params;
    expect(kv).toMatchObject({
      do_remote_prefill: true,
      remote_engine_id: expect.any(String),
      remote_request_id: 'asc-1',
      remote_host: '127.0.3.4',
      remote_port: prefill.port,
      remote_num_prompt_tokens: expect.any(Number),
      last_token_id: expect.any(Number),
    });
    expect((kv['remote_block_ids'] as number[][])[0].length).toBeGreaterThan(1);
    const d = await post(`${decode.url}/v1/chat/completions`, { messages: LONG, max_tokens: 3, kv_transfer_params: kv });
    expect(d.json()).toMatchObject({ usage: { completion_tokens: 3 } });
    expect(decode.counters()).toMatchObject({ kvPullsReceived: 1, localPrefillFallbacks: 0 });
    expect(prefill.counters()['kvPullsServed']).toBe(1);
  });

  it("takes upstream vLLM's concurrent params as invalid: no blocks named", async () => {
    const kv = {
      do_remote_decode: false,
      do_remote_prefill: true,
      remote_bootstrap_addr: 'http://x:8998',
      remote_engine_id: 'e',
      transfer_id: 't',
    };
    const d = await post(`${decode.url}/v1/chat/completions`, { messages: LONG, max_tokens: 2, kv_transfer_params: kv });
    expect(d.status).toBe(200);
    expect(decode.counters()).toMatchObject({ kvParamsInvalid: 1, localPrefillFallbacks: 1 });
  });
});

describe("vLLM simulator: vLLM's NixlPushConnector", () => {
  const fleet = new SimFleet();
  let prefill: SimEngineHandle;
  let decode: SimEngineHandle;

  beforeAll(async () => {
    // An engine id given up front, as vLLM's push proxy demo is told it (`--prefill-engine-id`).
    prefill = await fleet.start({
      engine: 'vllm',
      role: 'prefill',
      host: '127.0.3.6',
      kvConnector: 'nixl-push',
      kvLeaseMs: 3000,
      engineId: 'prefill-engine-001',
    });
    decode = await fleet.start({ engine: 'vllm', role: 'decode', host: '127.0.3.7', kvConnector: 'nixl-push' });
  });
  afterAll(() => fleet.closeAll());

  const prefillFor = async (id: string, transferId: string) => {
    const body = { messages: LONG, max_tokens: 1, stream: false, kv_transfer_params: { ...NIXL_PREFILL_KV, transfer_id: transferId } };
    const p = await post(`${prefill.url}/v1/chat/completions`, body, { 'x-request-id': id });
    return p.json<{ kv_transfer_params: Record<string, unknown> }>().kv_transfer_params;
  };

  it('answers its coordinates (transfer_mode push); a decode sent afterwards registers and gets the KV written', async () => {
    const kv = await prefillFor('push-1', 'x1');
    expect(kv).toMatchObject({
      transfer_mode: 'push',
      remote_engine_id: 'prefill-engine-001',
      remote_host: '127.0.3.6',
      remote_port: prefill.port,
      tp_size: 1,
      pp_size: 1,
    });
    const d = await post(
      `${decode.url}/v1/chat/completions`,
      { messages: LONG, max_tokens: 2, kv_transfer_params: kv },
      { 'x-request-id': 'push-1' },
    );
    expect(d.json()).toMatchObject({ usage: { completion_tokens: 2 } });
    expect(decode.counters()).toMatchObject({ kvPushRegistrations: 1, kvPullsReceived: 1, localPrefillFallbacks: 0 });
    expect(prefill.counters()['kvPushesSent']).toBe(1);
  });

  it('pairs a decode and its prefill by the transfer id whichever comes first (here the decode registers while the prefill computes)', async () => {
    const coords = await prefillFor('push-2', 'x2'); // learns the coordinates; this one's KV waits for its lease
    const kv = {
      do_remote_decode: false,
      do_remote_prefill: true,
      remote_engine_id: coords['remote_engine_id'],
      remote_host: coords['remote_host'],
      remote_port: coords['remote_port'],
      tp_size: 1,
      pp_size: 1,
      remote_request_id: 'push-3',
      transfer_id: 'x3',
    };
    const sent = prefill.counters()['kvPushesSent'];
    const registered = decode.counters()['kvPushRegistrations'];
    const d = post(
      `${decode.url}/v1/chat/completions`,
      { messages: LONG, max_tokens: 2, kv_transfer_params: kv },
      { 'x-request-id': 'push-3' },
    );
    await waitFor(() => decode.counters()['kvPushRegistrations'] === registered + 1, { what: 'the decode to register' });
    await prefillFor('push-3', 'x3');
    expect((await d).status).toBe(200);
    expect(prefill.counters()['kvPushesSent']).toBe(sent + 1);
  });

  it('fails the load when the decode names another engine id (the handshake refuses it); params without tp_size are invalid', async () => {
    const coords = await prefillFor('push-4', 'x4');
    const d = await post(`${decode.url}/v1/chat/completions`, {
      messages: LONG,
      max_tokens: 2,
      kv_transfer_params: { ...coords, remote_engine_id: 'restarted-engine' },
    });
    expect(d.status).toBe(500);
    const { tp_size: _drop, ...noTp } = coords;
    const i = await post(`${decode.url}/v1/chat/completions`, { messages: LONG, max_tokens: 2, kv_transfer_params: noTp });
    expect(i.status).toBe(200);
    expect(decode.counters()['kvParamsInvalid']).toBe(1);
  });
});

describe('vLLM simulator: LMCacheConnectorV1 with a shared backend', () => {
  const fleet = new SimFleet();
  let prefill: SimEngineHandle;
  let decode: SimEngineHandle;

  beforeAll(async () => {
    const lmcache = { engine: 'vllm', kvConnector: 'lmcache', lmcacheStore: 'kv-connectors-test' } as const;
    prefill = await fleet.start({ ...lmcache, role: 'prefill', host: '127.0.3.8' });
    decode = await fleet.start({ ...lmcache, role: 'decode', host: '127.0.3.9' });
  });
  afterAll(() => fleet.closeAll());

  it('loads on the decode what the prefill stored, without any kv_transfer_params; a prompt not stored is computed', async () => {
    const p = await post(`${prefill.url}/v1/chat/completions`, { messages: LONG, max_tokens: 1, stream: false });
    expect(p.json()).toMatchObject({ kv_transfer_params: null });
    const d = await post(`${decode.url}/v1/chat/completions`, { messages: LONG, max_tokens: 2 });
    expect(d.status).toBe(200);
    expect(decode.counters()).toMatchObject({ kvPullsReceived: 1, localPrefillFallbacks: 0 });
    await post(`${decode.url}/v1/chat/completions`, { messages: [{ role: 'user', content: 'never prefilled' }], max_tokens: 2 });
    expect(decode.counters()).toMatchObject({ kvPullsReceived: 1, localPrefillFallbacks: 1 });
  });
});
