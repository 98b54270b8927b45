import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import type { EndpointRef } from '@triad/bus';
import type { SimEngineHandle } from '@triad/engine-sim';
import { waitFor } from '@triad/testing';
import { inferenceRequests, resetSims, startHarness, type Harness } from './support/harness';
import { vllmEpdSpec } from './support/specs';

const MODEL = 'Qwen/Qwen2.5-VL-3B-Instruct';
type Body = Record<string, unknown>;

const IMAGE_A = 'https://example.com/a.png';
const IMAGE_B = 'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';

function multimodal(model: string, extra: Body = {}): Body {
  return {
    model,
    messages: [
      { role: 'system', content: 'you describe images' },
      {
        role: 'user',
        content: [
          { type: 'text', text: 'compare' },
          { type: 'image_url', image_url: { url: IMAGE_A } },
          { type: 'image_url', image_url: { url: IMAGE_B } },
        ],
      },
    ],
    max_tokens: 5,
    mm_processor_kwargs: { max_pixels: 1024 },
    ...extra,
  };
}

const sha = (s: string): string => createHash('sha256').update(s).digest('hex');

/** The messages with each image part carrying the uuid the gateway gives it (sha256 of its URL). */
function withUuids(messages: unknown): unknown {
  return (messages as { content: unknown }[]).map((m) =>
    !Array.isArray(m.content)
      ? m
      : {
          ...m,
          content: (m.content as { type: string; image_url?: { url: string } }[]).map((p) =>
            p.image_url ? { ...p, uuid: sha(p.image_url.url) } : p,
          ),
        },
  );
}

async function post(h: Harness, body: Body, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${h.gateway.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
}

describe('gateway, vLLM EPD (E→P→D and E→PD) against engine-sims', () => {
  let h: Harness;
  let ecDir: string;
  let e0: SimEngineHandle;
  let e1: SimEngineHandle;
  let p: SimEngineHandle;
  let d: SimEngineHandle;
  let pd: SimEngineHandle;
  const refs: Record<string, EndpointRef> = {};

  beforeAll(async () => {
    ecDir = mkdtempSync(join(tmpdir(), 'triad-ec-'));
    h = await startHarness();
    e0 = await h.startSim({ engine: 'vllm', role: 'encode', host: '127.0.4.1', model: MODEL, sharedEcDir: ecDir });
    e1 = await h.startSim({ engine: 'vllm', role: 'encode', host: '127.0.4.2', model: MODEL, sharedEcDir: ecDir });
    p = await h.startSim({ engine: 'vllm', role: 'prefill', host: '127.0.4.3', model: MODEL, sharedEcDir: ecDir });
    d = await h.startSim({ engine: 'vllm', role: 'decode', host: '127.0.4.4', model: MODEL });
    pd = await h.startSim({ engine: 'vllm', role: 'both', host: '127.0.4.5', model: MODEL, sharedEcDir: ecDir });
    const selector = {
      matchLabels: { app: 'vl' },
      pdGroup: { groupKey: 'g', encodeLabels: { r: 'e' }, prefillLabels: { r: 'p' }, decodeLabels: { r: 'd' } },
    };
    await h.putServer('epd', {
      model: MODEL,
      inferenceEngine: 'vLLM',
      pipelineMode: 'epd',
      kvConnector: { type: 'nixl' },
      workloadPort: { port: 8000, protocol: 'http' },
      workloadSelector: selector,
    });
    await h.putServer('epd2', {
      model: MODEL,
      inferenceEngine: 'vLLM',
      pipelineMode: 'epd',
      workloadPort: { port: 8000, protocol: 'http' },
      workloadSelector: { ...selector, pdGroup: { groupKey: 'g', encodeLabels: { r: 'e' }, decodeLabels: { r: 'd' } } },
    });
    await h.putRoute('vl', { modelName: 'vl', rules: [{ targetModels: [{ modelServerName: 'epd', weight: 100 }] }] });
    await h.putRoute('vl2', { modelName: 'vl-e-pd', rules: [{ targetModels: [{ modelServerName: 'epd2', weight: 100 }] }] });
    refs['e0'] = await h.putEndpoint('epd', 'e0', 'encode', e0, { group: 'g1' });
    refs['e1'] = await h.putEndpoint('epd', 'e1', 'encode', e1, { group: 'g1' });
    refs['p'] = await h.putEndpoint('epd', 'p', 'prefill', p, { group: 'g1' });
    refs['d'] = await h.putEndpoint('epd', 'd', 'decode', d, { group: 'g1' });
    refs['pd'] = await h.putEndpoint('epd2', 'pd', 'decode', pd, { group: 'g1' });
    h.decide = (r) => ({
      id: r.id,
      ok: true,
      mode: 'epd',
      encoders: r.mediaItems.map((m) => ({
        item: m.index,
        endpoint: m.index % 2 === 0 ? refs['e0'] : refs['e1'],
        alternates: [],
        affinity: false,
      })),
      attempts:
        r.modelServer === 'epd'
          ? [
              {
                endpoint: refs['d'],
                prefill: refs['p'],
              },
            ]
          : [{ endpoint: refs['pd'] }],
    });
    await h.waitForModel('vl');
    await h.waitForModel('vl-e-pd');
  });
  afterAll(async () => {
    await h?.close();
    rmSync(ecDir, { recursive: true, force: true });
  });

  beforeEach(() => resetSims(h));

  it('fans out one encoder request per item, each holding only its item, then prefill and decode with the parent id', async () => {
    const res = await post(h, multimodal('vl'), { 'x-request-id': 'req-epd-1' });
    expect(res.status).toBe(200);
    const [enc0] = inferenceRequests(e0);
    const [enc1] = inferenceRequests(e1);
    expect(inferenceRequests(e0)).toHaveLength(1);
    expect(inferenceRequests(e1)).toHaveLength(1);
    expect(enc0?.headers['x-request-id']).toMatch(/^req-epd-1:0:[0-9a-f]{6}$/);
    expect(enc1?.headers['x-request-id']).toMatch(/^req-epd-1:1:[0-9a-f]{6}$/);
    expect(enc0?.body).toEqual({
      model: MODEL,
      messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: IMAGE_A }, uuid: sha(IMAGE_A) }] }],
      stream: false,
      mm_processor_kwargs: { max_pixels: 1024 },
    });
    expect((enc1?.body as { messages: { content: unknown[] }[] }).messages[0]?.content).toEqual([
      {
        type: 'image_url',
        image_url: { url: IMAGE_B },
        uuid: sha(IMAGE_B),
      },
    ]);
    const [pre] = inferenceRequests(p);
    const [dec] = inferenceRequests(d);
    expect(pre?.headers['x-request-id']).toBe('req-epd-1');
    expect(dec?.headers['x-request-id']).toBe('req-epd-1');
    expect(pre?.body).toMatchObject({ stream: false, max_tokens: 1, kv_transfer_params: { do_remote_decode: true } });
    // Without enableMmEmbeds the media stay raw, keyed by the uuids the encoders saw, with the encoders' entries.
    expect((pre?.body as { messages: unknown[] }).messages).toEqual(withUuids(multimodal('vl').messages));
    expect(Object.keys((pre?.body as { ec_transfer_params: object }).ec_transfer_params)).toHaveLength(2);
    expect(dec?.body).toMatchObject({ max_tokens: 5, kv_transfer_params: { do_remote_prefill: true } });
    // The prefill found both items in the shared EC store the encoders wrote: the encode stage did its job.
    expect(p.counters()['ecHits']).toBeGreaterThanOrEqual(2);
  });

  it('skips encode for text-only requests', async () => {
    const res = await post(h, { model: 'vl', messages: [{ role: 'user', content: 'just text' }], max_tokens: 3 });
    expect(res.status).toBe(200);
    expect(inferenceRequests(e0)).toHaveLength(0);
    expect(inferenceRequests(e1)).toHaveLength(0);
    expect(inferenceRequests(p)).toHaveLength(1);
    expect(inferenceRequests(d)).toHaveLength(1);
  });

  it('E→PD: encoders, then the original body straight to the PD instance', async () => {
    const client = new OpenAI({ baseURL: `${h.gateway.url}/v1`, apiKey: 'x' });
    const body = multimodal('vl-e-pd', { stream: true });
    const stream = await client.chat.completions.create(body as unknown as OpenAI.ChatCompletionCreateParamsStreaming);
    let n = 0;
    for await (const c of stream) if (c.choices[0]?.delta.content) n++;
    expect(n).toBe(5);
    expect(inferenceRequests(e0)).toHaveLength(1);
    expect(inferenceRequests(e1)).toHaveLength(1);
    expect(inferenceRequests(p)).toHaveLength(0);
    const sent = inferenceRequests(pd)[0]?.body as Body;
    expect(sent).toEqual({
      ...body,
      model: MODEL,
      messages: withUuids(body['messages']),
      stream_options: { include_usage: true },
      ec_transfer_params: expect.any(Object),
    });
    expect(pd.counters()['localEncodes'] ?? 0).toBe(0);
  });

  it("an item's encoders all failing: the prefill gets the client's media to encode itself (shared-storage EC), marked", async () => {
    const before = inferenceRequests(p).length;
    e1.setFault({ mode: 'error500', count: 1 });
    const res = await post(h, multimodal('vl'));
    expect(res.status).toBe(200);
    expect(res.headers.get('x-triad-stage-fallback')).toBe('encode');
    await res.text();
    // The prefill leg carries the media as the client sent them and no encoder entries: its connector finds what it
    // can (shared storage) and encodes the rest.
    const sent = inferenceRequests(p).slice(before)[0]?.body as Body;
    expect(sent['ec_transfer_params']).toBeUndefined();
    expect(JSON.stringify(sent['messages'])).toContain(IMAGE_B);
  });

  it('fails the request naming the item and stage (not the encoder) when an encoder fails with retries off, and runs nothing downstream', async () => {
    // Retries off (the reliability baseline) also turns the stage fallback off: the encoder's failure is the answer.
    await h.putServer('epd', vllmEpdSpec(MODEL, 'vl', { trafficPolicy: { retry: { attempts: 0, retryInterval: '1ms' } } }));
    const downstream = () => inferenceRequests(p).length + inferenceRequests(d).length;
    let res: Response | undefined;
    await waitFor(
      async () => {
        e1.setFault({ mode: 'error500', count: 1 });
        const before = downstream();
        res = await post(h, multimodal('vl'));
        if (res.status === 200) {
          await res.text();
          return false; // the gateway still had the old retry policy
        }
        expect(downstream()).toBe(before);
        return true;
      },
      { what: 'the retry policy applied' },
    );
    expect(res?.status).toBe(502);
    const err = ((await res!.json()) as { error: { message: string; code: string; type: string } }).error;
    expect(err.code).toBe('GATEWAY_UPSTREAM_ERROR');
    expect(err.message).toMatch(/^encode of item 1 failed with HTTP 500/);
    expect(err.message).not.toContain('default.epd.e1');
  });
});

describe('gateway, SGLang EPD against engine-sims', () => {
  let h: Harness;
  let e: SimEngineHandle;
  let p: SimEngineHandle;
  let d: SimEngineHandle;

  beforeAll(async () => {
    h = await startHarness();
    e = await h.startSim({ engine: 'sglang', role: 'encode', host: '127.0.5.1', model: MODEL });
    p = await h.startSim({
      engine: 'sglang',
      role: 'prefill',
      host: '127.0.5.2',
      model: MODEL,
      bootstrapPort: 0,
      languageOnly: true,
      encoderUrls: [e.url],
    });
    d = await h.startSim({ engine: 'sglang', role: 'decode', host: '127.0.5.3', model: MODEL });
    await h.putServer('sgepd', {
      model: MODEL,
      inferenceEngine: 'SGLang',
      pipelineMode: 'epd',
      workloadPort: { port: 30000, protocol: 'http' },
      workloadSelector: {
        matchLabels: { app: 'sgvl' },
        pdGroup: { groupKey: 'g', encodeLabels: { r: 'e' }, prefillLabels: { r: 'p' }, decodeLabels: { r: 'd' } },
      },
    });
    await h.putRoute('sgvl', { modelName: 'sgvl', rules: [{ targetModels: [{ modelServerName: 'sgepd', weight: 100 }] }] });
    await h.putEndpoint('sgepd', 'e', 'encode', e, { group: 'g1' });
    const pre = await h.putEndpoint('sgepd', 'p', 'prefill', p, { group: 'g1' });
    const dec = await h.putEndpoint('sgepd', 'd', 'decode', d, { group: 'g1' });
    h.decide = (r) => ({ id: r.id, ok: true, mode: 'epd', attempts: [{ endpoint: dec, prefill: pre }], encoders: [] });
    await h.waitForModel('sgvl');
  });
  afterAll(async () => {
    await h?.close();
  });

  it('runs plain SGLang PD against the language-only prefill, which calls the encoders registered with it', async () => {
    const res = await post(h, multimodal('sgvl'));
    expect(res.status).toBe(200);
    const [pre] = inferenceRequests(p);
    const [dec] = inferenceRequests(d);
    expect(pre?.rawBody).toBe(dec?.rawBody);
    expect(pre?.body).toMatchObject({ bootstrap_host: '127.0.5.2', bootstrap_port: p.bootstrapPort });
    expect(pre?.body).not.toHaveProperty('epd_bootstrap_addr');
    expect((pre?.body as { messages: unknown[] }).messages).toEqual(multimodal('sgvl').messages);
    // The gateway asks for no encoder plan (the prefill spreads items over its registry) and never calls E itself.
    expect(h.batches.flat().at(-1)?.mediaItems).toEqual([]);
    expect(e.requests().filter((r) => r.path === '/encode').length).toBeGreaterThanOrEqual(1);
    expect(p.counters()['encoderCalls']).toBeGreaterThanOrEqual(1);
  });
});
