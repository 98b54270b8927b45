import type { SimEngineHandle } from '@triad/engine-sim';
import { get, post, SimFleet } from './helpers';

const image = (n: number) => ({ type: 'image_url', image_url: { url: `https://example.com/img-${n}.png` } });
const mmMessages = (...parts: object[]) => [{ role: 'user', content: [{ type: 'text', text: 'Compare these.' }, ...parts] }];

interface EncodeBody {
  encoder_idx: number;
  mm_items: string[];
  num_parts: number;
  part_idx: number;
  req_id: string;
  modality: string;
  prefill_host: string;
  embedding_port: null;
}

describe('SGLang simulator: EPD (encoder-only servers and a language-only prefill)', () => {
  const fleet = new SimFleet();
  let e0: SimEngineHandle;
  let e1: SimEngineHandle;
  let lang: SimEngineHandle;
  let decode: SimEngineHandle;

  beforeAll(async () => {
    e0 = await fleet.start({ engine: 'sglang', role: 'encode', host: '127.0.0.9' });
    e1 = await fleet.start({ engine: 'sglang', role: 'encode', host: '127.0.0.10' });
    lang = await fleet.start({ engine: 'sglang', role: 'prefill', host: '127.0.0.11', languageOnly: true });
    decode = await fleet.start({ engine: 'sglang', role: 'decode', host: '127.0.0.12', bootstrapTimeoutMs: 5_000 });
  });
  afterAll(() => fleet.closeAll());

  const pd = (
    fields: Record<string, unknown>, room: number,
  ) => ({ ...fields, bootstrap_host: lang.host, bootstrap_port: lang.bootstrapPort, bootstrap_room: room });

  it('keeps an encoder registry (register, list, unregister; a missing url is a 400)', async () => {
    expect((await post(`${lang.url}/register_encoder_url`, { url: e0.url })).text).toBe('OK');
    expect((await post(`${lang.url}/register_encoder_url`, { url: `${e1.url}/` })).text).toBe('OK');
    expect((await get(`${lang.url}/list_encoder_urls`)).json()).toEqual({ encoder_urls: [e0.url, e1.url] });
    expect((await post(`${lang.url}/register_encoder_url`, {})).status).toBe(400);
    const del = await fetch(
      `${lang.url}/unregister_encoder_url`,
      { method: 'DELETE', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ url: e1.url }) },
    );
    expect(del.status).toBe(200);
    expect((await get(`${lang.url}/list_encoder_urls`)).json()).toEqual({ encoder_urls: [e0.url] });
    await post(`${lang.url}/register_encoder_url`, { url: e1.url });
  });

  it('fans the items of a multimodal request out to its encoders itself, split into groups', async () => {
    e0.clearRequests();
    e1.clearRequests();
    const body = pd({ model: 'sim-model', messages: mmMessages(image(1), image(2), image(3)), max_tokens: 4, rid: 'mm-1' }, 11);
    const [d, p] = await Promise.all([post(`${decode.url}/v1/chat/completions`, body), post(`${lang.url}/v1/chat/completions`, body)]);
    expect(p.status).toBe(200);
    expect(d.status).toBe(200);
    const calls = [...e0.requests(), ...e1.requests()].filter((r) => r.path === '/encode').map((r) => r.body as EncodeBody);
    expect(calls).toHaveLength(2);
    expect(calls.flatMap((c) => c.mm_items).sort()).toEqual([1, 2, 3].map((n) => `https://example.com/img-${n}.png`));
    for (const c of calls) {
      expect(c).toMatchObject({ num_parts: 2, modality: 'IMAGE', prefill_host: lang.host, embedding_port: null });
      expect(c.req_id).toBe(`mm-1_local_part_${c.part_idx}`);
    }
    expect(lang.counters()['encoderCalls']).toBeGreaterThanOrEqual(2);
    expect(e0.counters()['encodes']! + e1.counters()['encodes']!).toBe(3);
  });

  it('does not call encoders for a text-only request', async () => {
    const before = lang.counters()['encoderCalls'];
    const body = pd({ messages: [{ role: 'user', content: 'just text' }], max_tokens: 2 }, 12);
    await Promise.all([post(`${decode.url}/v1/chat/completions`, body), post(`${lang.url}/v1/chat/completions`, body)]);
    expect(lang.counters()['encoderCalls']).toBe(before);
  });

  it('honours epd_bootstrap_addr: the named prefill’s encoders serve the request', async () => {
    const other = await fleet.start({ engine: 'sglang', role: 'prefill', host: '127.0.0.13', languageOnly: true, encoderUrls: [e1.url] });
    e0.clearRequests();
    e1.clearRequests();
    const body = pd({ messages: mmMessages(image(7)), max_tokens: 1, epd_bootstrap_addr: other.url }, 13);
    const [, p] = await Promise.all([post(`${decode.url}/v1/chat/completions`, body), post(`${lang.url}/v1/chat/completions`, body)]);
    expect(p.status).toBe(200);
    expect(e0.requests().filter((r) => r.path === '/encode')).toHaveLength(0);
    expect(e1.requests().filter((r) => r.path === '/encode')).toHaveLength(1);
  });

  it('fails a multimodal request when no encoder is registered', async () => {
    const lonely = await fleet.start({ engine: 'sglang', role: 'prefill', host: '127.0.0.14', languageOnly: true });
    const res = await post(
      `${lonely.url}/v1/chat/completions`,
      { messages: mmMessages(image(9)), bootstrap_host: lonely.host, bootstrap_port: lonely.bootstrapPort, bootstrap_room: 14 },
    );
    expect(res.status).toBe(500);
    expect(res.json()).toMatchObject({ object: 'error', type: 'InternalServerError', code: 500 });
  });

  it('fails the request when an encoder fails', async () => {
    e0.setFault({ mode: 'error500', count: 1 });
    const res = await post(`${lang.url}/v1/chat/completions`, pd({ messages: mmMessages(image(4), image(5)), max_tokens: 1 }, 15));
    expect(res.status).toBe(500);
    expect(res.json<{ message: string }>().message).toContain('Encoder request failed');
    expect(lang.counters()['encoderFailures']).toBeGreaterThanOrEqual(1);
  });

  it('encoder answers /encode with null and rejects a malformed body with its error shape', async () => {
    const ok = await post(
      `${e0.url}/encode`,
      {
        encoder_idx: 0, mm_items: ['https://example.com/x.png'], num_parts: 1, part_idx: 0, req_id: 'r_local_part_0', modality: 'IMAGE',
        prefill_host: '127.0.0.1', embedding_port: null,
      },
    );
    expect(ok).toMatchObject({ status: 200, text: 'null' });
    const bad = await post(`${e0.url}/encode`, { req_id: 'r2', mm_items: [] });
    expect(bad.status).toBe(400);
    expect(bad.json()).toMatchObject({ status: 'error', req_id: 'r2' });
    expect((await get(`${e0.url}/health`)).status).toBe(200);
    expect((await post(`${e0.url}/v1/chat/completions`, { messages: [] })).status).toBe(404);
  });
});
