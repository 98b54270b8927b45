import type { SimEngineHandle, SimEngineOptions } from '@triad/engine-sim';
import { freePort, waitFor } from '@triad/testing';
import { SimFleet, sseEvents } from './helpers';
import { chat, contentUuid, embedsRef, encoderRequest, ERROR_EVENT, image, QUESTION, user, type EcEntry, type Part } from './epd-shapes';

type Answer = { ec_transfer_params: Record<string, EcEntry> };

async function delta(sim: SimEngineHandle, run: () => Promise<unknown>): Promise<Record<string, number>> {
  const before = sim.counters();
  await run();
  const after = sim.counters();
  return Object.fromEntries(Object.keys(after).map((k) => [k, after[k] - (before[k] ?? 0)]));
}

/** Push waits in these tests are short so a push that never comes fails fast; 60 s is vLLM's default. */
const PUSH_WAIT_MS = 300;

describe('vLLM simulator: Mooncake EC connector (ECMooncakeConnector), E→PD', () => {
  const fleet = new SimFleet();
  let encoder: SimEngineHandle;
  let pd: SimEngineHandle;
  let seq = 0;

  beforeAll(async () => {
    encoder = await fleet.start({ engine: 'vllm', role: 'encode', host: '127.0.0.60', ecConnector: 'mooncake' });
    pd = await fleet.start({
      engine: 'vllm',
      role: 'both',
      host: '127.0.0.61',
      ecConnector: 'mooncake',
      enableMmEmbeds: true,
      dataParallel: 2,
      ecPushWaitTimeoutMs: PUSH_WAIT_MS,
    });
  });
  afterAll(() => fleet.closeAll());

  /** What the proxy does for one request: transfer ids per item, the encode with consumer_zmq, then the PD body. */
  async function encodeFor(parts: Part[], rank: number, consumerRank = rank): Promise<{ body: Record<string, unknown>; ids: string[] }> {
    const ids = parts.map(() => `t${++seq}`);
    const params = { consumer_zmq: pd.ecControlAddresses![consumerRank], ec_items: ids.map((transfer_id) => ({ transfer_id })) };
    const res = await chat(encoder, encoderRequest(parts, { ec_transfer_params: params }));
    expect(res.status).toBe(200);
    const entries = res.json<Answer>().ec_transfer_params;
    const content = [QUESTION, ...parts.map((p) => embedsRef(p, entries[contentUuid(p)]))];
    const ecItems = parts.map((p, i) => ({ mm_hash: contentUuid(p), transfer_id: ids[i] }));
    const handles = { ec_items: ecItems, ...entries };
    const body = { model: 'sim-model', messages: [{ role: 'user', content }], max_tokens: 3, ec_transfer_params: handles };
    return { body, ids };
  }

  it('exposes one tcp:// control address per DP rank', () => {
    const address = expect.stringMatching(/^tcp:\/\/127\.0\.0\.61:\d+$/);
    expect(pd.ecControlAddresses).toEqual([address, address]);
    expect(new Set(pd.ecControlAddresses).size).toBe(2);
    expect(encoder.ecControlAddresses).toBeUndefined();
  });

  it('pushes every item to the named rank; the PD pinned to that rank finds them and encodes nothing', async () => {
    const parts = [image('https://example.com/mc/a.png'), image('https://example.com/mc/b.png')];
    let request: { body: Record<string, unknown> } | undefined;
    const onE = await delta(encoder, async () => (request = await encodeFor(parts, 1)));
    expect(onE).toMatchObject({ pushesSent: 2, pushFailures: 0 });
    const onPd = await delta(pd, async () => {
      const res = await chat(pd, request!.body, { 'x-data-parallel-rank': '1' });
      expect(res.status).toBe(200);
    });
    expect(onPd).toMatchObject({ ecHits: 2, localEncodes: 0, pushWaitTimeouts: 0, dpRank1Requests: 1, dpRank0Requests: 0 });
  });

  it('waits for a push that has not arrived yet', async () => {
    const parts = [image('https://example.com/mc/late.png')];
    const ids = [`t${++seq}`];
    const entry = { metadata: { image_grid_thw: [[1, 32, 32]] }, item_indices: [0] };
    const ecItems = [{ mm_hash: contentUuid(parts[0]), transfer_id: ids[0] }];
    const body = { messages: user(embedsRef(parts[0], entry)), max_tokens: 2, ec_transfer_params: { ec_items: ecItems } };
    const waiting = chat(pd, body, { 'x-data-parallel-rank': '0', 'x-request-id': 'mc-late' });
    await waitFor(() => pd.requests().some((r) => r.headers['x-request-id'] === 'mc-late'), { what: 'the PD to hold the request' });
    const params = { consumer_zmq: pd.ecControlAddresses![0], ec_items: [{ transfer_id: ids[0] }] };
    expect((await chat(encoder, encoderRequest(parts, { ec_transfer_params: params }))).status).toBe(200);
    expect((await waiting).status).toBe(200);
  });

  it('a push that never arrives fails the request after the wait; a re-encode with new transfer ids recovers', async () => {
    const parts = [image('https://example.com/mc/lost.png')];
    // The push goes to rank 0 while the request runs on rank 1: it never reaches the rank that waits.
    const { body } = await encodeFor(parts, 1, 0);
    const failed = await delta(pd, async () => {
      const res = await chat(pd, body, { 'x-data-parallel-rank': '1' });
      expect(res.status).toBe(500);
      expect(res.json()).toEqual({ error: { message: 'Internal server error', type: 'InternalServerError', param: null, code: 500 } });
    });
    expect(failed).toMatchObject({ pushWaitTimeouts: 1, ecRequestsFailed: 1, localEncodes: 0 });
    const retry = await encodeFor(parts, 1);
    const res = await chat(pd, retry.body, { 'x-data-parallel-rank': '1' });
    expect(res.status).toBe(200);
  });

  it('a streamed request whose push never arrives gets the open stream, then an error event and [DONE]', async () => {
    const { body } = await encodeFor([image('https://example.com/mc/lost-stream.png')], 0, 1);
    const res = await chat(pd, { ...body, stream: true }, { 'x-data-parallel-rank': '0' });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(sseEvents(res.text)).toEqual([ERROR_EVENT, '[DONE]']);
  });

  it('a client that leaves while the consumer waits for a push is an abort, not a failed hand-off', async () => {
    // A consumer that would wait long: the request can only end through the client leaving.
    const patient = await fleet.start({ engine: 'vllm', role: 'both', host: '127.0.0.64', ecConnector: 'mooncake', enableMmEmbeds: true });
    const ref = { type: 'image_embeds', image_embeds: { image_grid_thw: [1, 32, 32] }, uuid: 'mc-gone' };
    const client = new AbortController();
    const leaving = fetch(`${patient.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-request-id': 'mc-gone' },
      body: JSON.stringify({ messages: user(ref), max_tokens: 1 }),
      signal: client.signal,
    }).catch(() => 'left');
    await waitFor(() => patient.requests().some((r) => r.headers['x-request-id'] === 'mc-gone'), { what: 'the PD to hold the request' });
    client.abort();
    expect(await leaving).toBe('left');
    await waitFor(() => patient.counters()['aborted'] === 1, { what: 'the abort to be counted' });
    expect(patient.counters()).toMatchObject({ ecRequestsFailed: 0, pushWaitTimeouts: 0 });
  });

  it('without consumer_zmq the encoder pushes nothing, and a consumer given raw media waits and fails (no fallback)', async () => {
    const a = image('https://example.com/mc/classic.png');
    const onE = await delta(encoder, async () => {
      const res = await chat(encoder, { model: 'sim-model', messages: [{ role: 'user', content: [a] }], max_tokens: 1, stream: false });
      expect(res.status).toBe(200);
    });
    expect(onE).toMatchObject({ pushesSent: 0, pushFailures: 0 });
    const onPd = await delta(pd, async () => expect((await chat(pd, { messages: user(QUESTION, a), max_tokens: 1 })).status).toBe(500));
    expect(onPd).toMatchObject({ pushWaitTimeouts: 1, localEncodes: 0 });
  });

  it('counts a push to an address nobody listens on as failed; the encoder still answers', async () => {
    const dead = `tcp://127.0.0.62:${await freePort()}`;
    const onE = await delta(encoder, async () => {
      const params = { consumer_zmq: dead, ec_items: [{ transfer_id: 'dead-1' }] };
      const res = await chat(encoder, encoderRequest([image('https://example.com/mc/dead.png')], { ec_transfer_params: params }));
      expect(res.status).toBe(200);
    });
    expect(onE).toMatchObject({ pushesSent: 0, pushFailures: 1 });
  });
});

describe('vLLM simulator: Mooncake control ports', () => {
  const fleet = new SimFleet();
  afterAll(() => fleet.closeAll());

  it('rank r of a consumer started with ecControlPort P listens on P + r', async () => {
    const opts: SimEngineOptions = { engine: 'vllm', role: 'prefill', host: '127.0.0.63', ecConnector: 'mooncake', dataParallel: 2 };
    // Two adjacent free ports cannot be reserved in advance: retry on the rare clash.
    const sim = await waitFor(async () => fleet.start({ ...opts, ecControlPort: await freePort() }), { what: 'two adjacent free ports' });
    const ports = sim.ecControlAddresses!.map((a) => Number(a.split(':').pop()));
    expect(ports[1]).toBe(ports[0] + 1);
  });
});
