import type { SimEngineHandle } from '@triad/engine-sim';
import { SimFleet, sseEvents } from './helpers';
import {
  chat,
  contentUuid,
  embedsRef,
  encoderRequest,
  ERROR_EVENT,
  image,
  PREFILL_KV,
  QUESTION,
  user,
  type EcEntry,
  type Part,
} from './epd-shapes';

type Answer = { ec_transfer_params: Record<string, EcEntry>; kv_transfer_params: Record<string, unknown> | null };

/** Counter changes of a sim across `run`. */
async function delta(sim: SimEngineHandle, run: () => Promise<unknown>): Promise<Record<string, number>> {
  const before = sim.counters();
  await run();
  const after = sim.counters();
  return Object.fromEntries(Object.keys(after).map((k) => [k, after[k] - (before[k] ?? 0)]));
}

describe('vLLM simulator: NIXL P2P EC connector (ECCPUConnector)', () => {
  const fleet = new SimFleet();
  let encoder: SimEngineHandle;
  let prefill: SimEngineHandle;
  let decode: SimEngineHandle;
  let pd: SimEngineHandle;

  beforeAll(async () => {
    encoder = await fleet.start({ engine: 'vllm', role: 'encode', host: '127.0.0.50', ecConnector: 'nixl' });
    prefill = await fleet.start({ engine: 'vllm', role: 'prefill', host: '127.0.0.51', ecConnector: 'nixl', enableMmEmbeds: true });
    decode = await fleet.start({ engine: 'vllm', role: 'decode', host: '127.0.0.52', enableMmEmbeds: true });
    pd = await fleet.start({ engine: 'vllm', role: 'both', host: '127.0.0.53', ecConnector: 'nixl', enableMmEmbeds: true });
  });
  afterAll(() => fleet.closeAll());

  async function encode(parts: Part[]): Promise<Record<string, EcEntry>> {
    const res = await chat(encoder, encoderRequest(parts));
    expect(res.status).toBe(200);
    return res.json<Answer>().ec_transfer_params;
  }

  /** The proxy's P/PD body: references in place of the media, and every encoder entry under its key. */
  function rewritten(parts: Part[], entries: Record<string, EcEntry>, extra: object = {}): object {
    const content = [QUESTION, ...parts.map((p) => embedsRef(p, entries[contentUuid(p)]))];
    return { model: 'sim-model', messages: [{ role: 'user', content }], max_tokens: 4, ec_transfer_params: { ...entries }, ...extra };
  }

  it('the encoder announces peer_host, peer_port and size_bytes next to the metadata', async () => {
    const a = image('https://example.com/nixl/a.png');
    expect(await encode([a])).toEqual({
      [contentUuid(a)]: {
        metadata: { image_grid_thw: [[1, 32, 32]] },
        item_indices: [0],
        peer_host: '127.0.0.50',
        peer_port: encoder.port,
        size_bytes: 256 * 16,
      },
    });
  });

  it('E→P→D: the prefill pulls both items from the encoder, the decode pulls the KV; nothing is encoded twice', async () => {
    const parts = [image('https://example.com/nixl/p1.png'), image('https://example.com/nixl/p2.png')];
    const entries = await encode(parts);
    let kv: unknown;
    const onE = await delta(encoder, async () => {
      const onP = await delta(prefill, async () => {
        const body = rewritten(parts, entries, { max_tokens: 1, stream: false, kv_transfer_params: PREFILL_KV });
        const res = await chat(prefill, body, { 'x-request-id': 'nixl-epd-1' });
        expect(res.status).toBe(200);
        kv = res.json<Answer>().kv_transfer_params;
      });
      expect(onP).toMatchObject({ ecPullsReceived: 2, ecHits: 2, localEncodes: 0, embedsParts: 2 });
    });
    expect(onE).toMatchObject({ ecPullsServed: 2, ecPullsRejected: 0 });
    // The decode gets the same references and handles, plus the prefill's KV params.
    const onD = await delta(decode, async () => {
      const res = await chat(decode, rewritten(parts, entries, { kv_transfer_params: kv }), { 'x-request-id': 'nixl-epd-1' });
      expect(res.status).toBe(200);
    });
    expect(onD).toMatchObject({ kvPullsReceived: 1, localEncodes: 0 });
  });

  it('E→PD: the aggregated consumer pulls the item', async () => {
    const parts = [image('https://example.com/nixl/pd.png')];
    const entries = await encode(parts);
    const onPd = await delta(pd, async () => expect((await chat(pd, rewritten(parts, entries))).status).toBe(200));
    expect(onPd).toMatchObject({ ecPullsReceived: 1, localEncodes: 0 });
  });

  it('the classic shape (raw media, no handles) is served with a counted local encode', async () => {
    const a = image('https://example.com/nixl/classic.png');
    await chat(encoder, { model: 'sim-model', messages: [{ role: 'user', content: [a] }], max_tokens: 1, stream: false });
    const onP = await delta(prefill, async () => {
      const res = await chat(prefill, { model: 'sim-model', messages: user(QUESTION, a), max_tokens: 1, kv_transfer_params: PREFILL_KV });
      expect(res.status).toBe(200);
    });
    expect(onP).toMatchObject({ localEncodes: 1, ecMisses: 1, ecPullsReceived: 0 });
  });

  it('a pull the encoder refuses falls back to a local encode when the request has the media, and fails it otherwise', async () => {
    const a = image('https://example.com/nixl/unknown.png');
    const handle = {
      metadata: { image_grid_thw: [[1, 32, 32]] },
      item_indices: [0],
      peer_host: '127.0.0.50',
      peer_port: encoder.port,
      size_bytes: 4096,
    };
    const params = { ec_transfer_params: { [contentUuid(a)]: handle } };
    const withMedia = await delta(pd, async () => {
      const res = await chat(pd, { messages: [{ role: 'user', content: [{ ...a, uuid: contentUuid(a) }] }], max_tokens: 1, ...params });
      expect(res.status).toBe(200);
    });
    expect(withMedia).toMatchObject({ ecPullsFailed: 1, localEncodes: 1 });
    const reference = await delta(pd, async () => {
      const res = await chat(pd, { messages: [{ role: 'user', content: [embedsRef(a, handle)] }], max_tokens: 1, ...params });
      expect(res.status).toBe(500);
    });
    expect(reference).toMatchObject({ ecPullsFailed: 1, localEncodes: 0, ecRequestsFailed: 1 });
  });

  it('a size_bytes that does not match the item fails the request: 500, or an error event once a stream is open', async () => {
    const parts = [image('https://example.com/nixl/size.png')];
    const entries = await encode(parts);
    const wrong = { [contentUuid(parts[0])]: { ...entries[contentUuid(parts[0])], size_bytes: 999 } };
    const counted = await delta(pd, async () => {
      const res = await chat(pd, rewritten(parts, wrong));
      expect(res.status).toBe(500);
      expect(res.json()).toMatchObject({ error: { type: 'InternalServerError', code: 500 } });
      const stream = await chat(pd, rewritten(parts, wrong, { stream: true }));
      expect(stream.status).toBe(200);
      expect(sseEvents(stream.text)).toEqual([ERROR_EVENT, '[DONE]']);
    });
    expect(counted).toMatchObject({ ecHandlesInvalid: 2, ecRequestsFailed: 2, ecPullsReceived: 0 });
  });

  it('in-process pulls (nixlSideChannel) ask an encoder of the same process directly, with the same checks', async () => {
    const e = await fleet.start({ engine: 'vllm', role: 'encode', host: '127.0.0.54', ecConnector: 'nixl', nixlSideChannel: 'in-process' });
    const c = await fleet.start({
      engine: 'vllm',
      role: 'both',
      host: '127.0.0.55',
      ecConnector: 'nixl',
      enableMmEmbeds: true,
      nixlSideChannel: 'in-process',
    });
    const parts = [image('https://example.com/nixl/in-process.png')];
    const res = await chat(e, encoderRequest(parts));
    const entries = res.json<Answer>().ec_transfer_params;
    const onC = await delta(c, async () => expect((await chat(c, rewritten(parts, entries))).status).toBe(200));
    expect(onC).toMatchObject({ ecPullsInProcess: 1, ecPullsReceived: 1, localEncodes: 0 });
    expect(e.counters()['ecPullsServed']).toBe(1);
    expect(e.requests().some((r) => r.path === '/sim/ec/pull')).toBe(false);
  });

  it('a handle under another identifier is not announced for this item: local encode from the media', async () => {
    const a = image('https://example.com/nixl/other.png');
    const entries = await encode([a]);
    const onPd = await delta(pd, async () => {
      const kwargs = { mm_processor_kwargs: { max_pixels: 1024 } };
      const res = await chat(pd, { messages: user(a), max_tokens: 1, ...kwargs, ec_transfer_params: entries });
      expect(res.status).toBe(200);
    });
    expect(onPd).toMatchObject({ localEncodes: 1, ecPullsReceived: 0, ecPullsFailed: 0 });
  });
});
