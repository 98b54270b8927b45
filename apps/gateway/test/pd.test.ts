import OpenAI from 'openai';
import type { SimEngineHandle } from '@triad/engine-sim';
import type { KvConnectorType } from '@triad/crd';
import { waitFor } from '@triad/testing';
import { inferenceRequests, startHarness, type Harness } from './support/harness';

const MODEL = 'Qwen/Qwen2.5-7B';

type Body = Record<string, unknown>;

describe('gateway, vLLM PD against engine-sims', () => {
  let h: Harness;
  const pairs = new Map<string, { p: SimEngineHandle; d: SimEngineHandle }>();
  const kinds: (KvConnectorType | 'none')[] = ['nixl', 'mooncake', 'lmcache', 'http', 'none'];

  beforeAll(async () => {
    h = await startHarness();
    let octet = 1;
    for (const kind of kinds) {
      // Engines that run the connector the ModelServer names (`mooncake` without a probe result is vllm-ascend's,
      // the sequential flow; upstream vLLM's concurrent one is in pd-kv-connectors.test.ts, LMCache too).
      const kvConnector = kind === 'mooncake' ? { kvConnector: 'mooncake-ascend' as const } : {};
      const p = await h.startSim({ engine: 'vllm', role: 'prefill', host: `127.0.2.${octet++}`, model: MODEL, ...kvConnector });
      const d = await h.startSim({ engine: 'vllm', role: 'decode', host: `127.0.2.${octet++}`, model: MODEL, ...kvConnector });
      pairs.set(kind, { p, d });
      const server = `pd-${kind}`;
      await h.putServer(server, {
        model: MODEL,
        inferenceEngine: 'vLLM',
        workloadPort: { port: 8000, protocol: 'http' },
        workloadSelector: { matchLabels: { app: server }, pdGroup: { groupKey: 'g', prefillLabels: { r: 'p' }, decodeLabels: { r: 'd' } } },
        ...(kind === 'none' ? {} : { kvConnector: { type: kind } }),
      });
      await h.putRoute(server, { modelName: server, rules: [{ targetModels: [{ modelServerName: server, weight: 100 }] }] });
      await h.putEndpoint(server, `${server}-p`, 'prefill', p, { group: 'g1' });
      await h.putEndpoint(server, `${server}-d`, 'decode', d, { group: 'g1' });
    }
    // A server whose decision lists two P/D pairs (the nixl pair first, the mooncake pair as the alternate).
    await h.putServer('pd-failover', {
      model: MODEL,
      inferenceEngine: 'vLLM',
      workloadPort: { port: 8000, protocol: 'http' },
      kvConnector: { type: 'nixl' },
      workloadSelector: { matchLabels: { app: 'f' }, pdGroup: { groupKey: 'g', prefillLabels: { r: 'p' }, decodeLabels: { r: 'd' } } },
    });
    await h.putRoute('pd-failover', {
      modelName: 'pd-failover',
      rules: [{ targetModels: [{ modelServerName: 'pd-failover', weight: 100 }] }],
    });
    const attemptOf = (server: string) => {
      const { p, d } = pairs.get(server.slice(3)) as { p: SimEngineHandle; d: SimEngineHandle };
      const key = (pod: string) => `default.${server}.${pod}`;
      return {
        endpoint: { key: key(`${server}-d`), pod: `${server}-d`, ip: d.host, port: d.port },
        prefill: { key: key(`${server}-p`), pod: `${server}-p`, ip: p.host, port: p.port },
      };
    };
    h.decide = (r) => ({
      id: r.id,
      ok: true,
      mode: 'pd',
      encoders: [],
      attempts: r.modelServer === 'pd-failover' ? [attemptOf('pd-nixl'), attemptOf('pd-mooncake')] : [attemptOf(r.modelServer)],
    });
    for (const kind of kinds) await h.waitForModel(`pd-${kind}`);
    await h.waitForModel('pd-failover');
  });
  afterAll(async () => {
    await h?.close();
  });

  it.each(['nixl', 'mooncake'] as const)(
    '%s (sequential): prefill asks for a remote decode, decode gets the prefill kv_transfer_params verbatim',
    async (kind) => {
      const { p, d } = pairs.get(kind)!;
      p.clearRequests();
      d.clearRequests();
      const client = new OpenAI({ baseURL: `${h.gateway.url}/v1`, apiKey: 'x' });
      const stream = await client.chat.completions.create({
        model: `pd-${kind}`,
        messages: [{ role: 'user', content: 'disaggregate me' }],
        max_tokens: 6,
        stream: true,
        max_completion_tokens: 6,
      });
      let text = '';
      for await (const c of stream) text += c.choices[0]?.delta.content ?? '';
      expect(text.length).toBeGreaterThan(0);
      const [pre] = inferenceRequests(p);
      const [dec] = inferenceRequests(d);
      const pb = pre?.body as Body;
      const db = dec?.body as Body;
      expect(pb).toMatchObject({ model: MODEL, stream: false, max_tokens: 1, max_completion_tokens: 1 });
      expect(pb['stream_options']).toBeUndefined();
      expect(pb['kv_transfer_params']).toEqual({
        do_remote_decode: true,
        do_remote_prefill: false,
        remote_engine_id: null,
        remote_block_ids: null,
        remote_host: null,
        remote_port: null,
      });
      expect(db).toMatchObject({ model: MODEL, stream: true, max_tokens: 6, stream_options: { include_usage: true } });
      expect(db['kv_transfer_params']).toMatchObject({
        do_remote_prefill: true,
        do_remote_decode: false,
        remote_engine_id: expect.any(String),
        remote_block_ids: expect.any(Array),
      });
      expect(dec?.headers['x-request-id']).toBe(pre?.headers['x-request-id']);
      // The decode pulled the blocks the prefill kept: a real hand-off, not a silent local prefill.
      expect(d.counters()['kvPullsReceived']).toBeGreaterThan(0);
      expect(d.counters()['localPrefillFallbacks']).toBe(0);
      // "verbatim": the raw JSON text the decode got is the text the prefill produced (same key order and spacing).
      expect(dec?.rawBody).toContain(`"kv_transfer_params":${JSON.stringify(db['kv_transfer_params'])}`);
    },
  );

  it.each(['http', 'none'] as const)('%s: plain sequential prefill then decode, no KV params relayed', async (kind) => {
    const { p, d } = pairs.get(kind)!;
    p.clearRequests();
    d.clearRequests();
    const res = await fetch(`${h.gateway.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: `pd-${kind}`, prompt: 'hello', max_tokens: 3 }),
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { usage: { completion_tokens: number } }).usage.completion_tokens).toBe(3);
    const pb = inferenceRequests(p)[0]?.body as Body;
    const db = inferenceRequests(d)[0]?.body as Body;
    expect(pb).toMatchObject({ stream: false, max_tokens: 1 });
    expect(pb['kv_transfer_params']).toBeUndefined();
    expect(db).toEqual({ model: MODEL, prompt: 'hello', max_tokens: 3 });
    expect(inferenceRequests(p)[0]?.path).toBe('/v1/completions');
  });

  it('asks the scheduler with the image content keys (encoder-cache affinity on P/D pods) and sends P and D the image parts', async () => {
    const { p, d } = pairs.get('nixl')!;
    p.clearRequests();
    d.clearRequests();
    const messages = [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'what is in these?' },
          { type: 'image_url', image_url: { url: 'https://images.example.com/cat.png' } },
          { type: 'image_url', image_url: { url: 'https://images.example.com/dog.png' }, uuid: 'dog-1' },
        ],
      },
    ];
    const res = await fetch(`${h.gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'pd-nixl', messages, max_tokens: 3 }),
    });
    expect(res.status).toBe(200);
    const asked = h.batches.flat().at(-1);
    expect(asked?.modelServer).toBe('pd-nixl');
    expect(asked?.mediaItems).toEqual([
      { index: 0, key: expect.stringMatching(/^u:[0-9a-f]{16}$/), modality: 'image' },
      { index: 1, key: 'id:dog-1', modality: 'image' },
    ]);
    // The pods encode the images themselves: both get the parts as the client sent them.
    expect((inferenceRequests(p)[0]?.body as Body)['messages']).toEqual(messages);
    expect((inferenceRequests(d)[0]?.body as Body)['messages']).toEqual(messages);
  });

  it('retries the next P/D pair when the first prefill fails before any byte went out', async () => {
    const first = pairs.get('nixl')!;
    const second = pairs.get('mooncake')!;
    for (const s of [first.p, first.d, second.p, second.d]) s.clearRequests();
    first.p.setFault({ mode: 'error500', count: 1 });
    const res = await fetch(`${h.gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'pd-failover', messages: [{ role: 'user', content: 'x' }], max_tokens: 2 }),
    });
    expect(res.status).toBe(200);
    expect(inferenceRequests(first.p)).toHaveLength(1);
    expect(inferenceRequests(first.d)).toHaveLength(0);
    expect(inferenceRequests(second.p)).toHaveLength(1);
    expect(inferenceRequests(second.d)).toHaveLength(1);
  });
});

describe('gateway, SGLang PD against engine-sims', () => {
  let h: Harness;
  let p: SimEngineHandle;
  let d: SimEngineHandle;

  beforeAll(async () => {
    h = await startHarness();
    p = await h.startSim({ engine: 'sglang', role: 'prefill', host: '127.0.3.1', model: MODEL, bootstrapPort: 0 });
    d = await h.startSim({ engine: 'sglang', role: 'decode', host: '127.0.3.2', model: MODEL });
    await h.putServer('sg', {
      model: MODEL,
      inferenceEngine: 'SGLang',
      workloadPort: { port: 30000, protocol: 'http' },
      // Kthena's `kvConnector: {}` default of http would break SGLang; Triad always uses the bootstrap protocol.
      kvConnector: { type: 'http' },
      workloadSelector: { matchLabels: { app: 'sg' }, pdGroup: { groupKey: 'g', prefillLabels: { r: 'p' }, decodeLabels: { r: 'd' } } },
    });
    await h.putRoute('sg', { modelName: 'sg', rules: [{ targetModels: [{ modelServerName: 'sg', weight: 100 }] }] });
    const pre = await h.putEndpoint('sg', 'sg-p', 'prefill', p, { group: 'g1' });
    const dec = await h.putEndpoint('sg', 'sg-d', 'decode', d, { group: 'g1' });
    h.decide = (r) => ({ id: r.id, ok: true, mode: 'pd', encoders: [], attempts: [{ endpoint: dec, prefill: pre }] });
    await h.waitForModel('sg');
  });
  afterAll(async () => {
    await h?.close();
  });

  it('sends the identical body with bootstrap host, port and an exact 63-bit room to P and D concurrently', async () => {
    const client = new OpenAI({ baseURL: `${h.gateway.url}/v1`, apiKey: 'x' });
    const rooms: bigint[] = [];
    for (let i = 0; i < 6; i++) {
      p.clearRequests();
      d.clearRequests();
      const res = await client.chat.completions.create({ model: 'sg', messages: [{ role: 'user', content: `room ${i}` }], max_tokens: 4 });
      expect(res.choices[0]?.message.content).toEqual(expect.any(String));
      const [pre] = inferenceRequests(p);
      const [dec] = inferenceRequests(d);
      expect(pre?.rawBody).toBe(dec?.rawBody);
      expect(pre?.headers['x-request-id']).toBe(dec?.headers['x-request-id']);
      const room = /"bootstrap_room":(\d+)/.exec(pre?.rawBody ?? '')?.[1] as string;
      expect(BigInt(room)).toBeLessThanOrEqual((1n << 63n) - 1n);
      rooms.push(BigInt(room));
      expect(pre?.body).toMatchObject({ bootstrap_host: '127.0.3.1', bootstrap_port: p.bootstrapPort, model: MODEL, max_tokens: 4 });
    }
    // Rooms above 2^53 are written as exact integers (a JS number would have rounded them).
    expect(rooms.some((r) => r > 1n << 53n)).toBe(true);
    expect(new Set(rooms.map(String)).size).toBe(rooms.length);
    // The decode only answers after the prefill registered the room while the decode waited: concurrency.
    expect(d.counters()['roomsMatched']).toBeGreaterThanOrEqual(6);
    expect(d.counters()['bootstrapTimeouts']).toBe(0);
  });

  it('fails the request when the prefill fails, aborting the waiting decode', async () => {
    p.setFault({ mode: 'error500', count: 1 });
    const abortedBefore = d.counters()['aborted'] ?? 0;
    const res = await fetch(`${h.gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'sg', messages: [{ role: 'user', content: 'x' }], max_tokens: 2 }),
    });
    expect(res.status).toBe(502);
    const message = ((await res.json()) as { error: { message: string } }).error.message;
    expect(message).toMatch(/^prefill failed with HTTP 500/);
    await waitFor(() => (d.counters()['aborted'] ?? 0) > abortedBefore, { what: 'decode leg aborted while it waited for the room' });
  });

  it('streams the decode answer and drains the prefill one', async () => {
    const client = new OpenAI({ baseURL: `${h.gateway.url}/v1`, apiKey: 'x' });
    p.clearRequests();
    const stream = await client.chat.completions.create({
      model: 'sg',
      messages: [{ role: 'user', content: 'stream' }],
      max_tokens: 5,
      stream: true,
    });
    let n = 0;
    for await (const c of stream) if (c.choices[0]?.delta.content) n++;
    expect(n).toBe(5);
    expect((inferenceRequests(p)[0]?.body as Body)['stream']).toBe(true);
  });
});
