import type { SimEngineHandle } from '@triad/engine-sim';
import { waitFor } from '@triad/testing';
import { get, post, SimFleet } from './helpers';

const image = (n: number, detail?: string) => ({
  type: 'image_url',
  image_url: { url: `https://example.com/img-${n}.png`, ...(detail ? { detail } : {}) },
});
const mmMessages = (...parts: object[]) => [{ role: 'user', content: [{ type: 'text', text: 'Compare these.' }, ...parts] }];

interface EncodeBody {
  encoder_idx: number;
  encoder_url: string;
  mm_items: unknown[];
  num_parts: number;
  part_idx: number;
  req_id: string;
  modality: string;
  prefill_host: string;
  embedding_port: null;
  time_stats_json: null;
}

const registryUrl = (sim: SimEngineHandle) => `http://${sim.host}:${sim.encoderBootstrapPort}`;

async function send(method: 'POST' | 'DELETE', url: string, body: unknown): Promise<{ status: number; text: string }> {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  const res = await fetch(url, { method, headers: { 'content-type': 'application/json' }, body: text });
  return { status: res.status, text: await res.text() };
}

const listed = async (sim: SimEngineHandle) =>
  (await get(`${registryUrl(sim)}/list_encoder_urls`)).json<{ encoder_urls: string[] }>().encoder_urls;

describe('SGLang simulator: EPD (encoder-only servers and a language-only prefill)', () => {
  const fleet = new SimFleet();
  let e0: SimEngineHandle;
  let e1: SimEngineHandle;
  let lang: SimEngineHandle;
  let decode: SimEngineHandle;

  beforeAll(async () => {
    e0 = await fleet.start({ engine: 'sglang', role: 'encode', host: '127.0.0.9' });
    e1 = await fleet.start({ engine: 'sglang', role: 'encode', host: '127.0.0.10' });
    lang = await fleet.start({
      engine: 'sglang',
      role: 'prefill',
      host: '127.0.0.11',
      languageOnly: true,
      encoderHealthCheckIntervalMs: 0,
    });
    decode = await fleet.start({ engine: 'sglang', role: 'decode', host: '127.0.0.12', bootstrapTimeoutMs: 5_000 });
  });
  afterAll(() => fleet.closeAll());

  const pd = (fields: Record<string, unknown>, room: number) => ({
    ...fields,
    bootstrap_host: lang.host,
    bootstrap_port: lang.bootstrapPort,
    bootstrap_room: room,
  });

  it('serves its encoder registry on a listener of its own, reported by /server_info, not on the API port', async () => {
    expect(lang.encoderBootstrapPort).toBeGreaterThan(0);
    expect(lang.encoderBootstrapPort).not.toBe(lang.port);
    expect(lang.encoderBootstrapPort).not.toBe(lang.bootstrapPort);
    expect(await get(`${registryUrl(lang)}/health`)).toMatchObject({ status: 200, text: 'OK' });
    expect((await get(`${lang.url}/list_encoder_urls`)).status).toBe(404);
    expect((await post(`${lang.url}/register_encoder_url`, { url: e0.url })).status).toBe(404);
    for (const path of ['/server_info', '/get_server_info']) {
      expect((await get(`${lang.url}${path}`)).json()).toMatchObject({
        language_only: true,
        encoder_bootstrap_port: lang.encoderBootstrapPort,
        disaggregation_mode: 'prefill',
        disaggregation_bootstrap_port: lang.bootstrapPort,
        dp_size: 1,
        load_balance_method: 'follow_bootstrap_room',
        encoder_urls: [],
      });
    }
  });

  it("registers verbatim, unregisters with 200 whether present or not, and rejects a missing url with SGLang's body", async () => {
    expect(await send('POST', `${registryUrl(lang)}/register_encoder_url`, { url: e0.url })).toEqual({ status: 200, text: 'OK' });
    expect((await send('POST', `${registryUrl(lang)}/register_encoder_url`, { url: `${e1.url}/` })).status).toBe(200);
    expect(await listed(lang)).toEqual([e0.url, `${e1.url}/`]);
    expect(await send('DELETE', `${registryUrl(lang)}/unregister_encoder_url`, { url: e1.url })).toEqual({ status: 200, text: 'OK' });
    expect(await listed(lang)).toEqual([e0.url, `${e1.url}/`]);
    expect(await send('DELETE', `${registryUrl(lang)}/unregister_encoder_url`, { url: `${e1.url}/` })).toEqual({ status: 200, text: 'OK' });
    for (const [method, path] of [
      ['POST', '/register_encoder_url'],
      ['DELETE', '/unregister_encoder_url'],
    ] as const) {
      const missing = await send(method, `${registryUrl(lang)}${path}`, { url: '' });
      expect(missing).toEqual({ status: 400, text: '{"error":"Missing or empty \'url\' field"}' });
    }
    expect((await send('POST', `${registryUrl(lang)}/register_encoder_url`, '[1]')).status).toBe(422);
    expect(await listed(lang)).toEqual([e0.url]);
    await send('POST', `${registryUrl(lang)}/register_encoder_url`, { url: e1.url });
    expect(lang.counters()).toMatchObject({ registryRegistrations: 3, registryUnregistrations: 2 });
  });

  it('spreads the items of a multimodal request over its registry itself, with the current /encode body', async () => {
    e0.clearRequests();
    e1.clearRequests();
    const body = pd({ model: 'sim-model', messages: mmMessages(image(1), image(2, 'high'), image(3)), max_tokens: 4, rid: 'mm-1' }, 11);
    const [d, p] = await Promise.all([post(`${decode.url}/v1/chat/completions`, body), post(`${lang.url}/v1/chat/completions`, body)]);
    expect(p.status).toBe(200);
    expect(d.status).toBe(200);
    const calls = [...e0.requests(), ...e1.requests()].filter((r) => r.path === '/encode').map((r) => r.body as EncodeBody);
    expect(calls).toHaveLength(2);
    const items = calls.flatMap((c) => c.mm_items);
    expect(items).toHaveLength(3);
    const expected = [
      'https://example.com/img-1.png',
      { url: 'https://example.com/img-2.png', detail: 'high' },
      'https://example.com/img-3.png',
    ];
    expect(items).toEqual(expect.arrayContaining(expected));
    for (const c of calls) {
      expect(c).toMatchObject({ num_parts: 2, modality: 'IMAGE', prefill_host: lang.host, embedding_port: null, time_stats_json: null });
      expect(c.encoder_url).toBe([e0.url, e1.url][c.encoder_idx]);
      expect(c.req_id).toBe(`mm-1_local_part_${c.part_idx}`);
    }
    expect(lang.counters()['encoderCalls']).toBeGreaterThanOrEqual(2);
    expect(e0.counters()['encoderItemsServed'] + e1.counters()['encoderItemsServed']).toBe(3);
  });

  it('does not call encoders for a text-only request', async () => {
    const before = lang.counters()['encoderCalls'];
    const body = pd({ messages: [{ role: 'user', content: 'just text' }], max_tokens: 2 }, 12);
    await Promise.all([post(`${decode.url}/v1/chat/completions`, body), post(`${lang.url}/v1/chat/completions`, body)]);
    expect(lang.counters()['encoderCalls']).toBe(before);
  });

  it('ignores epd_bootstrap_addr (not an upstream field): its own registry serves the request', async () => {
    const other = await fleet.start({ engine: 'sglang', role: 'prefill', host: '127.0.0.13', languageOnly: true, encoderUrls: [e1.url] });
    e0.clearRequests();
    e1.clearRequests();
    const body = pd({ messages: mmMessages(image(7), image(8)), max_tokens: 1, epd_bootstrap_addr: registryUrl(other) }, 13);
    const [, p] = await Promise.all([post(`${decode.url}/v1/chat/completions`, body), post(`${lang.url}/v1/chat/completions`, body)]);
    expect(p.status).toBe(200);
    expect(e0.requests().filter((r) => r.path === '/encode')).toHaveLength(1);
    expect(e1.requests().filter((r) => r.path === '/encode')).toHaveLength(1);
    expect((await get(`${other.url}/server_info`)).json()).toMatchObject({ encoder_urls: [e1.url] });
  });

  it('runs without EPD when no encoder is registered: local encode with a vision tower, failure without one', async () => {
    const lonely = await fleet.start({ engine: 'sglang', role: 'both', host: '127.0.0.14', languageOnly: true });
    const res = await post(`${lonely.url}/v1/chat/completions`, { messages: mmMessages(image(9), image(10)), max_tokens: 2 });
    expect(res.status).toBe(200);
    expect(lonely.counters()).toMatchObject({ localEncodes: 2, encoderCalls: 0 });
    const towerless = await fleet.start({ engine: 'sglang', role: 'both', host: '127.0.0.14', languageOnly: true, visionTower: false });
    const failed = await post(`${towerless.url}/v1/chat/completions`, { messages: mmMessages(image(9)), max_tokens: 2 });
    expect(failed.status).toBe(500);
    expect(failed.json()).toMatchObject({ object: 'error', type: '500', code: 500 });
    const textOnly = { messages: [{ role: 'user', content: 'text is fine' }], max_tokens: 2 };
    const text = await post(`${towerless.url}/v1/chat/completions`, textOnly);
    expect(text.status).toBe(200);
  });

  it('fails the request when an encoder fails', async () => {
    e0.setFault({ mode: 'error500', count: 1 });
    e1.setFault({ mode: 'error500', count: 1 });
    const res = await post(`${lang.url}/v1/chat/completions`, pd({ messages: mmMessages(image(4), image(5)), max_tokens: 1 }, 15));
    expect(res.status).toBe(500);
    expect(res.json<{ message: string }>().message).toContain('Encoder request failed');
    expect(lang.counters()['encoderFailures']).toBeGreaterThanOrEqual(1);
  });

  it('encoder answers /encode with null (URL or object items) and rejects a malformed body with its error shape', async () => {
    const encode = {
      encoder_idx: 0,
      encoder_url: e0.url,
      num_parts: 1,
      part_idx: 0,
      req_id: 'r_local_part_0',
      modality: 'IMAGE',
      prefill_host: '127.0.0.1',
      embedding_port: null,
      time_stats_json: null,
    };
    const items = ['https://example.com/x.png', { url: 'https://example.com/y.png', detail: 'low' }];
    const ok = await post(`${e0.url}/encode`, { ...encode, mm_items: items });
    expect(ok).toMatchObject({ status: 200, text: 'null' });
    const bad = await post(`${e0.url}/encode`, { req_id: 'r2', mm_items: [] });
    expect(bad.status).toBe(400);
    expect(bad.json()).toMatchObject({ status: 'error', req_id: 'r2' });
    expect((await get(`${e0.url}/health`)).status).toBe(200);
    expect((await post(`${e0.url}/v1/chat/completions`, { messages: [] })).status).toBe(404);
  });
});

describe('SGLang simulator: the encoder registry health-checks its members', () => {
  const fleet = new SimFleet();
  let lang: SimEngineHandle;
  let encoderPort: number;

  beforeAll(async () => {
    const e = await fleet.start({ engine: 'sglang', role: 'encode', host: '127.0.0.16' });
    encoderPort = e.port;
    lang = await fleet.start({
      engine: 'sglang',
      role: 'both',
      host: '127.0.0.17',
      languageOnly: true,
      encoderUrls: [e.url, 'http://127.0.0.18:9'],
      encoderHealthCheckIntervalMs: 40,
      // Dead encoders here refuse connections at once; the probe timeout only bounds a healthy one's answer, which a
      // loaded machine may delay well past a few hundred ms (three such probes evicted it, breaking the counts).
      encoderHealthCheckTimeoutMs: 10_000,
      encoderEvictedTtlMs: 60_000,
    });
  });
  afterAll(() => fleet.closeAll());

  it('evicts an encoder after three failed probes, then revives it when it answers again, while keeping healthy ones', async () => {
    const url = `http://127.0.0.16:${encoderPort}`;
    await waitFor(async () => (await listed(lang)).join() === url, { what: 'the dead static encoder evicted' });
    expect(lang.counters()['registryEvictions']).toBe(1);
    // Take the encoder down: its URL stops answering.
    await fleet.closeOne(url);
    await waitFor(async () => (await listed(lang)).length === 0, { what: 'the encoder evicted' });
    expect(lang.counters()['registryEvictions']).toBe(2);
    await fleet.start({ engine: 'sglang', role: 'encode', host: '127.0.0.16', port: encoderPort });
    await waitFor(async () => (await listed(lang)).join() === url, { what: 'the encoder revived' });
    expect(lang.counters()['registryRevivals']).toBe(1);
    // A multimodal request goes to the revived encoder again.
    const res = await post(`${lang.url}/v1/chat/completions`, { messages: mmMessages(image(1)), max_tokens: 1 });
    expect(res.status).toBe(200);
    expect(lang.counters()['encoderCalls']).toBe(1);
  });

  it('forgets an evicted encoder after the evicted TTL, and an explicit unregister stops its revival', async () => {
    const short = await fleet.start({
      engine: 'sglang',
      role: 'both',
      host: '127.0.0.19',
      languageOnly: true,
      encoderUrls: ['http://127.0.0.18:9'],
      encoderHealthCheckIntervalMs: 30,
      encoderHealthCheckTimeoutMs: 10_000,
      encoderEvictedTtlMs: 100,
    });
    await waitFor(() => short.counters()['registryDrops'] === 1, { what: 'the evicted encoder dropped after its TTL' });
    expect(await listed(short)).toEqual([]);
    // The unregister on a registry that keeps evicted encoders for a minute: without it the encoder would be revived.
    const keeper = await fleet.start({
      engine: 'sglang',
      role: 'both',
      host: '127.0.0.20',
      languageOnly: true,
      encoderUrls: [],
      encoderHealthCheckIntervalMs: 30,
      encoderHealthCheckTimeoutMs: 10_000,
      encoderEvictedTtlMs: 60_000,
    });
    const url = `http://127.0.0.16:${encoderPort}`;
    await fleet.closeOne(url);
    await send('POST', `${registryUrl(keeper)}/register_encoder_url`, { url });
    await waitFor(() => keeper.counters()['registryEvictions'] === 1, { what: 'evicted' });
    await send('DELETE', `${registryUrl(keeper)}/unregister_encoder_url`, { url });
    await fleet.start({ engine: 'sglang', role: 'encode', host: '127.0.0.16', port: encoderPort });
    const rounds = keeper.counters()['registryProbeRounds'];
    await waitFor(() => keeper.counters()['registryProbeRounds'] >= rounds + 3, { what: 'probe rounds after the encoder came back' });
    expect(await listed(keeper)).toEqual([]);
    expect(keeper.counters()['registryRevivals']).toBe(0);
    expect(keeper.counters()['registryDrops']).toBe(0);
  });
});
