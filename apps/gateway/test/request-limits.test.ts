import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { EncoderChoice, EndpointRef } from '@triad/bus';
import type { SimEngineHandle } from '@triad/engine-sim';
import { accessLines, inferenceRequests, startHarness, type Harness } from './support/harness';
import { vllmEpdSpec } from './support/specs';

const MODEL = 'Qwen/Qwen2.5-VL-3B-Instruct';
type Body = Record<string, unknown>;

function images(n: number, extra: Body = {}): Body {
  const content: unknown[] = [{ type: 'text', text: 'describe' }];
  for (let i = 0; i < n; i++) content.push({ type: 'image_url', image_url: { url: `https://example.com/${i}.png` } });
  return { model: 'vl', messages: [{ role: 'user', content }], max_tokens: 3, ...extra };
}

async function post(h: Harness, body: Body | string): Promise<Response> {
  return fetch(`${h.gateway.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

async function errorOf(res: Response): Promise<{ message: string; type: string; param: string | null; code: string }> {
  return ((await res.json()) as { error: { message: string; type: string; param: string | null; code: string } }).error;
}

/** Unhandled rejections seen by this test process while the gateway ran in it (the crash of issue 16). */
const unhandled: unknown[] = [];
function onUnhandled(reason: unknown): void {
  unhandled.push(reason);
}

describe('gateway request limits: bounds checked before any work starts, and no rejection escapes the stage loop', () => {
  let h: Harness;
  let ecDir: string;
  let e0: SimEngineHandle;
  let e1: SimEngineHandle;
  let p: SimEngineHandle;
  let d: SimEngineHandle;
  const refs: Record<string, EndpointRef> = {};
  /** Which items the stand-in scheduler names an encoder for (all by default). */
  let encodersFor: (index: number) => boolean = () => true;

  beforeAll(async () => {
    process.on('unhandledRejection', onUnhandled);
    ecDir = mkdtempSync(join(tmpdir(), 'triad-limits-'));
    h = await startHarness({ config: { maxMediaItems: 8 } });
    e0 = await h.startSim({ engine: 'vllm', role: 'encode', host: '127.0.16.1', model: MODEL, sharedEcDir: ecDir });
    e1 = await h.startSim({ engine: 'vllm', role: 'encode', host: '127.0.16.2', model: MODEL, sharedEcDir: ecDir });
    p = await h.startSim({ engine: 'vllm', role: 'prefill', host: '127.0.16.3', model: MODEL, sharedEcDir: ecDir });
    d = await h.startSim({ engine: 'vllm', role: 'decode', host: '127.0.16.4', model: MODEL });
    await h.putServer('epd', vllmEpdSpec(MODEL, 'vl'));
    await h.putRoute('vl', { modelName: 'vl', rules: [{ targetModels: [{ modelServerName: 'epd', weight: 100 }] }] });
    refs['e0'] = await h.putEndpoint('epd', 'e0', 'encode', e0, { group: 'g1' });
    refs['e1'] = await h.putEndpoint('epd', 'e1', 'encode', e1, { group: 'g1' });
    refs['p'] = await h.putEndpoint('epd', 'p', 'prefill', p, { group: 'g1' });
    refs['d'] = await h.putEndpoint('epd', 'd', 'decode', d, { group: 'g1' });
    h.decide = (r) => ({
      id: r.id,
      ok: true,
      mode: 'epd',
      encoders: r.mediaItems
        .filter((m) => encodersFor(m.index))
        .map((m): EncoderChoice => ({
          item: m.index,
          endpoint: m.index % 2 === 0 ? refs['e0'] : refs['e1'],
          alternates: [],
          affinity: false,
        })),
      attempts: [{ endpoint: refs['d'], prefill: refs['p'] }],
    });
    await h.waitForModel('vl');
  });
  afterAll(async () => {
    await h?.close();
    rmSync(ecDir, { recursive: true, force: true });
    process.off('unhandledRejection', onUnhandled);
  });

  beforeEach(() => {
    encodersFor = () => true;
    for (const s of h.sims) {
      s.clearRequests();
      s.setFault({ mode: 'ok' });
    }
  });

  afterEach(() => {
    expect(unhandled).toEqual([]);
  });

  function legsSent(): number {
    return h.sims.reduce((n, s) => n + inferenceRequests(s).length, 0);
  }

  it.each([9, 65, 1000])('refuses %i media items with a 400 naming the configured limit, before any leg (stream and not)', async (n) => {
    for (const stream of [false, true]) {
      const res = await post(h, images(n, { stream }));
      expect(res.status).toBe(400);
      expect(await errorOf(res)).toEqual({
        message: `the messages hold ${n} media items; the gateway accepts at most 8 (limit max-media-items)`,
        type: 'invalid_request_error',
        param: 'messages',
        code: 'GATEWAY_BAD_REQUEST',
      });
    }
    expect(legsSent()).toBe(0);
    // The gateway is still there and serves the next request in full.
    const ok = await post(h, images(8));
    expect(ok.status).toBe(200);
    // Every item was encoded (images bound for one encoder travel in one request).
    const encoded = [...inferenceRequests(e0), ...inferenceRequests(e1)].map(
      (r) => (r.body as { messages: { content: unknown[] }[] }).messages[0]?.content.length ?? 0,
    );
    expect(encoded.reduce((a, b) => a + b, 0)).toBe(8);
  });

  it('answers 10,000 levels of nesting, in content or in any field, with a 400 instead of a stack overflow', async () => {
    const deep = `${'['.repeat(10_000)}${']'.repeat(10_000)}`;
    for (const raw of [
      `{"model":"vl","messages":[{"role":"user","content":${deep}}]}`,
      `{"model":"vl","messages":[{"role":"user","content":"hi"}],"tools":${deep}}`,
      `{"model":"vl","messages":[{"role":"user","content":"hi"}],"metadata":${'{"a":'.repeat(10_000)}1${'}'.repeat(10_000)}}`,
    ]) {
      const res = await post(h, raw);
      expect(res.status).toBe(400);
      expect((await errorOf(res)).message).toBe(
        'request body nests JSON arrays/objects too deeply; the gateway accepts at most 64 (limit max-json-depth)',
      );
    }
    expect(legsSent()).toBe(0);
  });

  it('refuses a 5 MiB model string without echoing it', async () => {
    const res = await post(h, { model: 'm'.repeat(5 * 1024 * 1024), messages: [{ role: 'user', content: 'hi' }] });
    expect(res.status).toBe(400);
    const text = await res.text();
    expect(text.length).toBeLessThan(500);
    expect(JSON.parse(text)).toMatchObject({ error: { param: 'model', message: expect.stringContaining('(limit max-model-chars)') } });
    const line = accessLines(h).at(-1) as Record<string, unknown>;
    expect(JSON.stringify(line).length).toBeLessThan(2000);
  });

  it("fails a decision that lacks an item's encoder with nothing sent and nothing left in flight", async () => {
    encodersFor = (i) => i < 2;
    const res = await post(h, images(4, { stream: true }));
    expect(res.status).toBe(503);
    expect((await errorOf(res)).message).toBe('no encoder was chosen for media item 2');
    expect(legsSent()).toBe(0);
  });

  it("cancels the other items when one item's encode fails, and the prefill encodes them itself (stage fallback)", async () => {
    e0.setFault({ mode: 'error500' });
    // Items on e1 hang: the request must move on when e0's item fails, not when e1's encode budget runs out.
    e1.setFault({ mode: 'hang' });
    const res = await post(h, images(6));
    // The shared-storage EC connector lets the prefill encode what no encoder delivered (docs/reliability.md).
    expect(res.status).toBe(200);
    expect(res.headers.get('x-triad-stage-fallback')).toBe('encode');
    expect(inferenceRequests(p)).toHaveLength(1);
    expect(inferenceRequests(d)).toHaveLength(1);
  });
});
