import type { SimEngineHandle } from '@triad/engine-sim';
import { parsePrometheusText } from '@triad/prom-text';
import { waitFor } from '@triad/testing';
import { CHAT, get, post, SimFleet, sseEvents } from './helpers';

/** One gauge sample of a sim's /metrics with the given dp_rank. */
async function rankGauge(sim: SimEngineHandle, name: string, dpRank: number): Promise<number | undefined> {
  const { families } = parsePrometheusText((await get(`${sim.url}/metrics`)).text);
  return families.get(name)?.samples.find((s) => s.labels['dp_rank'] === String(dpRank))?.value;
}

describe('SGLang simulator: data-parallel ranks under PD', () => {
  const fleet = new SimFleet();
  let prefill: SimEngineHandle;
  let roundRobinPrefill: SimEngineHandle;
  let decode: SimEngineHandle;
  let patient: SimEngineHandle;
  let single: SimEngineHandle;

  beforeAll(async () => {
    prefill = await fleet.start({ engine: 'sglang', role: 'prefill', host: '127.0.0.21', dataParallel: 2 });
    roundRobinPrefill = await fleet.start({
      engine: 'sglang',
      role: 'prefill',
      host: '127.0.0.22',
      dataParallel: 2,
      loadBalanceMethod: 'round_robin',
    });
    // `decode` gives up on a room after 300 ms: only the test of a KV that never arrives uses it. Pairs expected to
    // succeed go to `patient`, which waits as long as a loaded machine takes to run the prefill.
    decode = await fleet.start({ engine: 'sglang', role: 'decode', host: '127.0.0.23', dataParallel: 2, bootstrapTimeoutMs: 300 });
    patient = await fleet.start({ engine: 'sglang', role: 'decode', host: '127.0.0.26', dataParallel: 2, bootstrapTimeoutMs: 60_000 });
    single = await fleet.start({ engine: 'sglang', role: 'both', host: '127.0.0.24' });
  });
  afterAll(() => fleet.closeAll());

  const body = (p: SimEngineHandle, room: number, extra: Record<string, unknown> = {}) => ({
    messages: CHAT,
    max_tokens: 2,
    bootstrap_host: p.host,
    bootstrap_port: p.bootstrapPort,
    bootstrap_room: room,
    ...extra,
  });
  type Fields = Record<string, unknown>;
  const pair = (p: SimEngineHandle, room: number, pExtra: Fields, dExtra: Fields, pHeaders: Record<string, string> = {}, d = patient) =>
    Promise.all([
      post(`${p.url}/v1/chat/completions`, body(p, room, pExtra), pHeaders),
      post(`${d.url}/v1/chat/completions`, body(p, room, dExtra)),
    ]);

  it('reports dp_size and the resolved load-balance method per role', async () => {
    expect((await get(`${prefill.url}/server_info`)).json()).toMatchObject({ dp_size: 2, load_balance_method: 'follow_bootstrap_room' });
    expect((await get(`${roundRobinPrefill.url}/server_info`)).json()).toMatchObject({ dp_size: 2, load_balance_method: 'round_robin' });
    const info = (await get(`${decode.url}/server_info`)).json();
    expect(info).toMatchObject({ dp_size: 2, load_balance_method: 'round_robin', disaggregation_mode: 'decode' });
  });

  it('pairs without hints: the prefill follows the room (room % dp) and the decode derives the same rank', async () => {
    for (const room of [4, 5, 6, 7]) {
      const [p, d] = await pair(prefill, room, {}, {});
      expect([p.status, d.status]).toEqual([200, 200]);
    }
    expect(patient.counters()['prefillRankLookups']).toBe(0);
  });

  it('honours routed_dp_rank on the prefill; the decode then needs disagg_prefill_dp_rank, or its KV never arrives', async () => {
    const [, unhinted] = await pair(prefill, 10, { routed_dp_rank: 1 }, {}, {}, decode);
    expect(unhinted.status).toBe(500);
    expect(unhinted.json<{ message: string }>().message).toMatch(/Request 10 timed out after 0\.3s in KVPoll\.WaitingForInput$/);
    const [p, d] = await pair(prefill, 12, { routed_dp_rank: 1 }, { disagg_prefill_dp_rank: 1 });
    expect([p.status, d.status]).toEqual([200, 200]);
  });

  it('takes the X-Data-Parallel-Rank header over the body, and data_parallel_rank as the deprecated alias', async () => {
    const [p, d] = await pair(prefill, 14, { routed_dp_rank: 0 }, { disagg_prefill_dp_rank: 1 }, { 'X-Data-Parallel-Rank': '1' });
    expect([p.status, d.status]).toEqual([200, 200]);
    const [p2, d2] = await pair(prefill, 16, { data_parallel_rank: 1 }, { disagg_prefill_dp_rank: 1 });
    expect([p2.status, d2.status]).toEqual([200, 200]);
  });

  it('pins the decode rank with routed_dp_rank (its transfer queue gauge shows the waiting request on that rank)', async () => {
    const pending = post(`${patient.url}/v1/chat/completions`, body(prefill, 18, { routed_dp_rank: 1 }));
    const waiting = (rank: number) => rankGauge(patient, 'sglang:num_decode_transfer_queue_reqs', rank);
    await waitFor(async () => (await waiting(1)) === 1, { what: 'decode waiting on rank 1' });
    expect(await waiting(0)).toBe(0);
    await post(`${prefill.url}/v1/chat/completions`, body(prefill, 18));
    expect((await pending).status).toBe(200);
  });

  it("looks the rank up at the prefill's bootstrap server when the prefill does not follow the room", async () => {
    for (const room of [20, 21, 22]) {
      const [p, d] = await pair(roundRobinPrefill, room, {}, {});
      expect([p.status, d.status]).toEqual([200, 200]);
    }
    expect(patient.counters()['prefillRankLookups']).toBe(3);
  });

  it("rejects a rank outside [0, dp) and a non-integer header with SGLang's texts", async () => {
    const out = await post(`${prefill.url}/v1/chat/completions`, body(prefill, 30, { routed_dp_rank: 2 }));
    expect(out.status).toBe(400);
    expect(out.json()).toMatchObject({ object: 'error', message: 'routed_dp_rank=2 out of range [0, 2)', code: 400 });
    const header = await post(`${prefill.url}/generate`, { text: 'x', bootstrap_room: 31 }, { 'x-data-parallel-rank': 'one' });
    expect(header.status).toBe(400);
    expect(header.json()).toEqual({ error: { message: "Invalid X-Data-Parallel-Rank header: must be an integer, got 'one'" } });
    const streamed = await post(`${prefill.url}/v1/chat/completions`, body(prefill, 32, { routed_dp_rank: -1, stream: true }));
    // The OpenAI routes wait for the first chunk before answering 200, so the tokenizer's ValueError is a plain 400.
    expect(streamed.status).toBe(400);
    expect(streamed.json()).toMatchObject({ object: 'error', message: 'routed_dp_rank=-1 out of range [0, 2)', code: 400 });
    const generate = await post(`${prefill.url}/generate`, { text: 'x', bootstrap_room: 33, routed_dp_rank: 5 });
    expect(generate.json()).toEqual({ error: { message: 'routed_dp_rank=5 out of range [0, 2)' } });
    // /generate opens its stream at once: the ValueError is an error event that names the 400.
    const generateStream = await post(`${prefill.url}/generate`, { text: 'x', bootstrap_room: 34, routed_dp_rank: 5, stream: true });
    expect(generateStream.status).toBe(200);
    expect(sseEvents(generateStream.text)).toEqual([
      JSON.stringify({
        error: { message: 'routed_dp_rank=5 out of range [0, 2)', type: 'invalid_request_error', code: 400, retryable: false },
      }),
      '[DONE]',
    ]);
  });

  it('ignores rank 0 on a server without DP and rejects any other rank', async () => {
    expect((await post(`${single.url}/v1/chat/completions`, { messages: CHAT, max_tokens: 1, routed_dp_rank: 0 })).status).toBe(200);
    const res = await post(`${single.url}/v1/chat/completions`, { messages: CHAT, max_tokens: 1 }, { 'X-Data-Parallel-Rank': '1' });
    expect(res.json()).toMatchObject({ message: 'routed_dp_rank=1 out of range [0, 1)' });
  });
});
