import type { EndpointRecord } from '@triad/bus';
import type { SimEngineHandle } from '@triad/engine-sim';
import { waitFor } from '@triad/testing';
import { inferenceRequests, sseData, startHarness, type Harness } from './support/harness';

// SGLang as it ships today, through the gateway with its own scheduler (`--scheduling in-process`): n > 1 under
// PD (fanned out into a request per sample), `/generate` on PD and aggregated servers, other `/v1/*` calls on PD-only models, DP-rank hints.

const MODEL = 'meta-llama/Llama-3.1-8B-Instruct';
type Body = Record<string, unknown>;

const pdSpec = (app: string) => ({
  model: MODEL,
  inferenceEngine: 'SGLang' as const,
  workloadPort: { port: 30000, protocol: 'http' as const },
  workloadSelector: { matchLabels: { app }, pdGroup: { groupKey: 'g', prefillLabels: { r: 'p' }, decodeLabels: { r: 'd' } } },
});

async function post(h: Harness, path: string, body: Body): Promise<Response> {
  return fetch(`${h.gateway.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
}

describe('gateway, SGLang PD and aggregated as SGLang ships them', () => {
  let h: Harness;
  let p: SimEngineHandle;
  let d: SimEngineHandle;
  let agg: SimEngineHandle;

  beforeAll(async () => {
    h = await startHarness({ config: { scheduling: 'in-process' } });
    p = await h.startSim({ engine: 'sglang', role: 'prefill', host: '127.0.13.1', model: MODEL, bootstrapPort: 0 });
    d = await h.startSim({ engine: 'sglang', role: 'decode', host: '127.0.13.2', model: MODEL });
    agg = await h.startSim({ engine: 'sglang', role: 'both', host: '127.0.13.3', model: MODEL });
    await h.putServer('pd', pdSpec('pd'));
    await h.putServer('agg', {
      model: MODEL,
      inferenceEngine: 'SGLang',
      workloadPort: { port: 30000, protocol: 'http' },
      workloadSelector: { matchLabels: { app: 'agg' } },
    });
    await h.putRoute('llama-pd', { modelName: 'llama-pd', rules: [{ targetModels: [{ modelServerName: 'pd', weight: 100 }] }] });
    await h.putRoute('llama-agg', { modelName: 'llama-agg', rules: [{ targetModels: [{ modelServerName: 'agg', weight: 100 }] }] });
    // PD for generation; other calls go to the aggregated target of the same rule (weight 0 keeps generation on PD).
    await h.putRoute('llama-mixed', {
      modelName: 'llama-mixed',
      rules: [
        {
          targetModels: [
            { modelServerName: 'pd', weight: 100 },
            { modelServerName: 'agg', weight: 0 },
          ],
        },
      ],
    });
    await h.putEndpoint('pd', 'p', 'prefill', p, { group: 'g1' });
    await h.putEndpoint('pd', 'd', 'decode', d, { group: 'g1' });
    await h.putEndpoint('agg', 'a', 'aggregated', agg);
    await h.waitForModel('llama-mixed');
  });
  afterAll(async () => {
    await h?.close();
  });
  beforeEach(() => {
    for (const s of [p, d, agg]) s.clearRequests();
  });

  // Long enough a prompt that nothing could be skipped: every sample runs its prefill leg.
  const LONG = 'Tell me about the history of the city, its rivers, bridges and markets. '.repeat(8);
  const roomsOf = (s: SimEngineHandle) => inferenceRequests(s).map((r) => /"bootstrap_room":(\d+)/.exec(r.rawBody)?.[1]);

  it('fans n=3 out into three single-sample PD requests, a room each, answered as one (non-stream)', async () => {
    const matched = d.counters()['roomsMatched'] ?? 0;
    const res = await post(h, '/v1/chat/completions', {
      model: 'llama-pd',
      n: 3,
      max_tokens: 4,
      messages: [{ role: 'user', content: LONG }],
    });
    expect(res.status).toBe(200);
    const answer = (await res.json()) as { id: string; choices: { index: number }[]; usage: Record<string, number> };
    expect(answer.choices.map((c) => c.index)).toEqual([0, 1, 2]);
    const prompt = answer.usage['prompt_tokens'];
    expect(prompt).toBeGreaterThan(50);
    expect(answer.usage).toMatchObject({ completion_tokens: 12, total_tokens: prompt + 12 });
    const prefills = inferenceRequests(p);
    expect(prefills.map((r) => (r.body as Body)['n'])).toEqual([1, 1, 1]);
    const rooms = roomsOf(p);
    expect(new Set(rooms).size).toBe(3);
    expect(new Set(roomsOf(d))).toEqual(new Set(rooms));
    expect((d.counters()['roomsMatched'] ?? 0) - matched).toBe(3);
    expect(d.counters()['parallelSamplingHangs'] ?? 0).toBe(0);
  });

  it('fans n=3 out streamed: the samples interleaved as choices 0..2, one usage chunk, one [DONE]', async () => {
    const res = await post(h, '/v1/chat/completions', {
      model: 'llama-pd',
      n: 3,
      stream: true,
      stream_options: { include_usage: true },
      max_tokens: 3,
      messages: [{ role: 'user', content: LONG }],
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    const events = sseData(await res.text());
    expect(events.filter((e) => e === '[DONE]')).toHaveLength(1);
    expect(events.at(-1)).toBe('[DONE]');
    const chunks = events
      .slice(0, -1)
      .map((e) => JSON.parse(e) as { id: string; choices: { index: number }[]; usage?: Record<string, number> | null });
    expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
    expect([...new Set(chunks.flatMap((c) => c.choices.map((x) => x.index)))].sort()).toEqual([0, 1, 2]);
    const usage = chunks.filter((c) => c.usage != null);
    expect(usage).toHaveLength(1);
    expect(usage[0]).toBe(chunks.at(-1));
    expect(usage[0].choices).toEqual([]);
    expect(usage[0].usage).toMatchObject({ completion_tokens: 9 });
    expect(new Set(roomsOf(p)).size).toBe(3);
  });

  it('refuses a fan-out above 128 samples with a 400 naming n, before any engine is called', async () => {
    for (const [path, body, param] of [
      ['/v1/chat/completions', { n: 129, messages: [{ role: 'user', content: LONG }] }, 'n'],
      ['/generate', { text: LONG, sampling_params: { n: 129 } }, 'sampling_params.n'],
    ] as const) {
      const res = await post(h, path, { model: 'llama-pd', ...body });
      expect(res.status).toBe(400);
      const error = ((await res.json()) as { error: { message: string; param: string } }).error;
      expect(error.param).toBe(param);
      expect(error.message).toContain('n=129');
    }
    expect(inferenceRequests(p)).toHaveLength(0);
    expect(inferenceRequests(d)).toHaveLength(0);
  });

  it('answers sampling_params.n=2 on /generate as SGLang does: a list of the samples', async () => {
    const res = await post(h, '/generate', { model: 'llama-pd', text: LONG, sampling_params: { n: 2, max_new_tokens: 2 } });
    expect(res.status).toBe(200);
    const answer = (await res.json()) as { meta_info: { completion_tokens: number } }[];
    expect(answer.map((a) => a.meta_info.completion_tokens)).toEqual([2, 2]);
    expect(new Set(roomsOf(p)).size).toBe(2);
    // Streamed, every event carries its sample's index, as SGLang's parallel samples do.
    const streamed = await post(h, '/generate', {
      model: 'llama-pd',
      text: LONG,
      stream: true,
      sampling_params: { n: 2, max_new_tokens: 2 },
    });
    const events = sseData(await streamed.text());
    expect(events.filter((e) => e === '[DONE]')).toHaveLength(1);
    const last = new Map<number, number>();
    for (const e of events.slice(0, -1)) {
      const ev = JSON.parse(e) as { index: number; meta_info: { completion_tokens: number } };
      last.set(ev.index, ev.meta_info.completion_tokens);
    }
    expect([...last.entries()].sort()).toEqual([
      [0, 2],
      [1, 2],
    ]);
  });

  it('ignores a top-level n on /generate as SGLang does: one pair, one answer, not a fan-out', async () => {
    const res = await post(h, '/generate', { model: 'llama-pd', text: LONG, n: 3, sampling_params: { max_new_tokens: 2 } });
    expect(res.status).toBe(200);
    const answer = (await res.json()) as { meta_info: { completion_tokens: number } };
    expect(Array.isArray(answer)).toBe(false);
    expect(answer.meta_info.completion_tokens).toBe(2);
    expect(inferenceRequests(p)).toHaveLength(1);
    expect(inferenceRequests(d)).toHaveLength(1);
  });

  it('leaves n=1 as it was: one pair, n passed on', async () => {
    const res = await post(h, '/v1/chat/completions', {
      model: 'llama-pd',
      n: 1,
      max_tokens: 2,
      messages: [{ role: 'user', content: LONG }],
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { choices: unknown[] }).choices).toHaveLength(1);
    expect(inferenceRequests(p).map((r) => (r.body as Body)['n'])).toEqual([1]);
    expect(inferenceRequests(d)).toHaveLength(1);
  });

  it("fails the whole request with a sample's error, aborting the other legs (non-stream)", async () => {
    p.setFault({ mode: 'error500', count: 1 });
    const res = await post(h, '/v1/chat/completions', {
      model: 'llama-pd',
      n: 3,
      max_tokens: 4,
      messages: [{ role: 'user', content: LONG }],
    });
    expect(res.status).toBe(502);
    const { error } = (await res.json()) as { error: { message: string } };
    expect(error.message).toMatch(/^prefill failed with HTTP 500/);
    // The failed sample's decode, pre-allocated for a room no prefill will fill, was aborted (and so freed).
    await waitFor(() => d.kvHeld().requests === 0, { what: 'the decode to hold nothing' });
    expect(inferenceRequests(d).length).toBeLessThanOrEqual(3);
  });

  it('ends a stream with one error event and one [DONE] when a sample dies mid-stream', async () => {
    d.setFault({ mode: 'die-mid-stream', count: 1 });
    const res = await post(h, '/v1/chat/completions', {
      model: 'llama-pd',
      n: 3,
      stream: true,
      max_tokens: 6,
      messages: [{ role: 'user', content: LONG }],
    });
    expect(res.status).toBe(200);
    const events = sseData(await res.text());
    expect(events.at(-1)).toBe('[DONE]');
    expect(events.filter((e) => e === '[DONE]')).toHaveLength(1);
    expect(JSON.parse(events.at(-2) as string)).toHaveProperty('error');
    await waitFor(() => d.kvHeld().requests === 0, { what: 'the decode to hold nothing' });
  });

  it('passes n=3 to an aggregated SGLang server, which samples in parallel itself', async () => {
    // (the sim samples in parallel only on /generate outside PD; what matters is what the gateway sends.)
    await post(h, '/v1/chat/completions', { model: 'llama-agg', n: 3, max_tokens: 2, messages: [{ role: 'user', content: 'hi' }] });
    expect(inferenceRequests(agg).map((r) => (r.body as Body)['n'])).toEqual([3]);
  });

  it("routes /generate under PD (non-stream): the bootstrap fields to both legs, the decode's answer to the client", async () => {
    const res = await post(h, '/generate', { model: 'llama-pd', text: 'Hello there', sampling_params: { max_new_tokens: 3 } });
    expect(res.status).toBe(200);
    const answer = (await res.json()) as { text: string; meta_info: { completion_tokens: number } };
    expect(answer.meta_info.completion_tokens).toBe(3);
    const [pre] = inferenceRequests(p);
    const [dec] = inferenceRequests(d);
    expect([pre?.path, dec?.path]).toEqual(['/generate', '/generate']);
    expect(pre?.rawBody).toBe(dec?.rawBody);
    expect(pre?.body).toMatchObject({ text: 'Hello there', bootstrap_host: p.host, bootstrap_port: p.bootstrapPort, model: MODEL });
    expect(d.counters()['roomsMatched']).toBeGreaterThanOrEqual(1);
  });

  it('routes /generate under PD streamed, and a text batch with one room per prompt', async () => {
    const res = await post(h, '/generate', { model: 'llama-pd', text: 'Hi', stream: true, sampling_params: { max_new_tokens: 3 } });
    expect(res.status).toBe(200);
    const events = sseData(await res.text());
    expect(events.at(-1)).toBe('[DONE]');
    expect(
      events.slice(0, -1).map((e) => (JSON.parse(e) as { meta_info: { completion_tokens: number } }).meta_info.completion_tokens),
    ).toEqual([1, 2, 3]);
    const batch = await post(h, '/generate', { model: 'llama-pd', text: ['a', 'b'], sampling_params: { max_new_tokens: 2 } });
    expect(batch.status).toBe(200);
    expect((await batch.json()) as unknown[]).toHaveLength(2);
    const rooms = (inferenceRequests(p).at(-1)?.body as Body)['bootstrap_room'];
    expect(rooms).toEqual([expect.any(Number), expect.any(Number)]);
  });

  it("asks for a model on /generate (SGLang's body has none, the gateway routes by it)", async () => {
    const res = await post(h, '/generate', { text: 'Hi', sampling_params: { max_new_tokens: 2 } });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { message: string; param: string } }).error).toMatchObject({
      param: 'model',
      message: expect.stringContaining("/generate needs a 'model' field"),
    });
  });

  it('routes /generate to an aggregated SGLang server, stream and non-stream', async () => {
    const res = await post(h, '/generate', { model: 'llama-agg', text: 'Hi', sampling_params: { max_new_tokens: 2 } });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { meta_info: { completion_tokens: number } }).meta_info.completion_tokens).toBe(2);
    const streamed = await post(h, '/generate', { model: 'llama-agg', text: 'Hi', stream: true, sampling_params: { max_new_tokens: 2 } });
    expect(sseData(await streamed.text())).toHaveLength(3);
    expect(inferenceRequests(agg).map((r) => r.path)).toEqual(['/generate', '/generate']);
    expect(inferenceRequests(agg)[0]?.body).not.toHaveProperty('bootstrap_room');
  });

  it('answers a /generate stream that SGLang refuses in its first event with the 400 that event names', async () => {
    // SGLang opens a /generate stream at once; a tokenizer ValueError (here a rank outside [0, dp)) is then an error
    // event carrying `code: 400` before any token, which the gateway answers as the 4xx it is.
    const body = { model: 'llama-agg', text: 'Hi', stream: true, routed_dp_rank: 3, sampling_params: { max_new_tokens: 2 } };
    const res = await post(h, '/generate', body);
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: Record<string, unknown> }).error).toMatchObject({
      message: expect.stringContaining('routed_dp_rank=3 out of range [0, 1)'),
      type: 'invalid_request_error',
      code: 'GATEWAY_UPSTREAM_ERROR',
    });
  });

  it('answers other /v1/* calls on a PD-only model with a 400 that says why, and sends them to an aggregated target if any', async () => {
    const res = await post(h, '/v1/embeddings', { model: 'llama-pd', input: 'hi' });
    expect(res.status).toBe(400);
    const { error } = (await res.json()) as { error: { message: string } };
    expect(error.message).toContain("/v1/embeddings is not served for model 'llama-pd'");
    expect(error.message).toContain('only /v1/chat/completions, /v1/completions and /generate are routed');
    expect(inferenceRequests(d)).toHaveLength(0);
    // The mixed route: the aggregated target serves it (the sim has no embeddings route: its 404 is relayed).
    const mixed = await post(h, '/v1/embeddings', { model: 'llama-mixed', input: 'hi' });
    expect(mixed.status).toBe(404);
    expect(agg.requests().map((r) => r.path)).toContain('/v1/embeddings');
    expect(d.requests().some((r) => r.path === '/v1/embeddings')).toBe(false);
    // Chat on the mixed route still runs PD.
    expect(
      (await post(h, '/v1/chat/completions', { model: 'llama-mixed', max_tokens: 2, messages: [{ role: 'user', content: 'x' }] })).status,
    ).toBe(200);
    expect(inferenceRequests(p)).toHaveLength(1);
  });
});

describe('gateway, SGLang DP-rank hints', () => {
  let h: Harness;
  let p: SimEngineHandle;
  let d: SimEngineHandle;

  beforeAll(async () => {
    h = await startHarness({ config: { scheduling: 'in-process' } });
    // A prefill that does not follow the room: without hints the decode would have to ask where the KV is.
    p = await h.startSim({
      engine: 'sglang',
      role: 'prefill',
      host: '127.0.14.1',
      model: MODEL,
      bootstrapPort: 0,
      dataParallel: 2,
      loadBalanceMethod: 'round_robin',
    });
    d = await h.startSim({ engine: 'sglang', role: 'decode', host: '127.0.14.2', model: MODEL, dataParallel: 2 });
    await h.putServer('dp', pdSpec('dp'));
    await h.putRoute('dp', { modelName: 'dp', rules: [{ targetModels: [{ modelServerName: 'dp', weight: 100 }] }] });
    await h.putEndpoint('dp', 'p', 'prefill', p, { group: 'g1', dpSize: 2 });
    await h.putEndpoint('dp', 'd', 'decode', d, { group: 'g1', dpSize: 2 });
    await h.waitForModel('dp');
  });
  afterAll(async () => {
    await h?.close();
  });

  const chat = (stream = false) =>
    post(h, '/v1/chat/completions', { model: 'dp', stream, max_tokens: 2, messages: [{ role: 'user', content: 'x' }] });
  const ranks = () =>
    inferenceRequests(p).map((r, i) => {
      const dec = inferenceRequests(d)[i]?.body as Body;
      return [(r.body as Body)['routed_dp_rank'], dec['disagg_prefill_dp_rank'], dec['routed_dp_rank']];
    });

  it("pins both legs' ranks, spreads them over the ranks, and spares the decode its rank lookup", async () => {
    for (let i = 0; i < 4; i++) expect((await chat(i % 2 === 1)).status).toBe(200);
    const seen = ranks();
    expect(seen).toHaveLength(4);
    for (const [prefillRank, kvRank, decodeRank] of seen) {
      expect(kvRank).toBe(prefillRank);
      expect([0, 1]).toContain(decodeRank);
    }
    expect(seen.filter(([r]) => r === 0)).toHaveLength(2);
    expect(seen.filter(([, , r]) => r === 1)).toHaveLength(2);
    expect(d.counters()['prefillRankLookups'] ?? 0).toBe(0);
    expect(d.counters()['bootstrapTimeouts'] ?? 0).toBe(0);
  });

  it('steers to the rank the scraped per-rank load shows idle', async () => {
    const busy: Partial<EndpointRecord> = {
      group: 'g1',
      dpSize: 2,
      metrics: {
        running: 40,
        waiting: 0,
        kvCacheUsage: 0,
        scrapedAt: Date.now(),
        stale: false,
        dpRanks: [
          { running: 40, waiting: 0 },
          { running: 0, waiting: 0 },
        ],
      },
    };
    await h.putEndpoint('dp', 'p', 'prefill', p, busy);
    p.clearRequests();
    d.clearRequests();
    // The record reaches the gateway's view asynchronously: wait until a request is pinned to rank 1, then hold it.
    await waitFor(
      async () => {
        expect((await chat()).status).toBe(200);
        return (inferenceRequests(p).at(-1)?.body as Body)['routed_dp_rank'] === 1;
      },
      { what: 'a prefill pinned to the idle rank' },
    );
    const before = inferenceRequests(p).length;
    for (let i = 0; i < 5; i++) expect((await chat()).status).toBe(200);
    expect(
      inferenceRequests(p)
        .slice(before)
        .map((r) => (r.body as Body)['routed_dp_rank']),
    ).toEqual([1, 1, 1, 1, 1]);
  });
});
