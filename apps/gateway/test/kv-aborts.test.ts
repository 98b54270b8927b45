import type { SimEngineHandle } from '@triad/engine-sim';
import { waitFor } from '@triad/testing';
import { accessLines, inferenceRequests, ref, startHarness, type Harness } from './support/harness';

// KV-ownership-aware aborts against engine-sims that model where each engine keeps KV for a peer:
// - vLLM (NIXL/Mooncake/LMCache `kv_transfer_params`): the prefill keeps the blocks of a remote-decode request until
//   a decode reads them or its lease ends (VLLM_NIXL_ABORT_REQUEST_TIMEOUT). A decode that never got the request
//   (it failed, or the client left first) cannot free them; the gateway then sends a one-token release leg.
// - SGLang (bootstrap room): the decode pre-allocates the blocks of the prompt and waits for the prefill's transfer
//   until SGLANG_DISAGGREGATION_WAITING_TIMEOUT; the gateway aborts the decode leg when the prefill leg fails or the
//   client leaves, and an aborted request frees its room.
// Each case runs with the gateway's action and without it (TRIAD_KV_RELEASE=false, or nobody aborting the decode).

const MODEL = 'Qwen/Qwen2.5-7B';
const N = 6;
// A 120-word prompt: 14 blocks of 16 tokens per request in the sims.
const PROMPT = Array.from({ length: 120 }, (_, i) => `word${i}`).join(' ');
const LONG = 600_000;

interface VllmPd {
  readonly p: SimEngineHandle;
  readonly d1: SimEngineHandle;
  readonly d2: SimEngineHandle;
}

/** A vLLM NIXL PD server: one prefill, two decodes; every decision tries (P, D1) and then (P, D2). */
async function vllmPd(h: Harness): Promise<VllmPd> {
  const p = await h.startSim({ engine: 'vllm', role: 'prefill', model: MODEL, kvLeaseMs: LONG });
  const d1 = await h.startSim({ engine: 'vllm', role: 'decode', model: MODEL });
  const d2 = await h.startSim({ engine: 'vllm', role: 'decode', model: MODEL });
  await h.putServer('pd', {
    model: MODEL,
    inferenceEngine: 'vLLM',
    workloadPort: { port: 8000, protocol: 'http' },
    kvConnector: { type: 'nixl' },
    workloadSelector: { matchLabels: { app: 'pd' }, pdGroup: { groupKey: 'g', prefillLabels: { r: 'p' }, decodeLabels: { r: 'd' } } },
  });
  await h.putRoute('pd', { modelName: 'pd', rules: [{ targetModels: [{ modelServerName: 'pd', weight: 100 }] }] });
  await h.putEndpoint('pd', 'p', 'prefill', p, { group: 'g1' });
  await h.putEndpoint('pd', 'd1', 'decode', d1, { group: 'g1' });
  await h.putEndpoint('pd', 'd2', 'decode', d2, { group: 'g1' });
  const prefill = ref('pd', 'p', p);
  h.decide = (r) => ({
    id: r.id,
    ok: true,
    mode: 'pd',
    encoders: [],
    attempts: [
      { prefill, endpoint: ref('pd', 'd1', d1) },
      { prefill, endpoint: ref('pd', 'd2', d2) },
    ],
  });
  await h.waitForModel('pd');
  return { p, d1, d2 };
}

const chat = (h: Harness, model: string, stream: boolean, signal?: AbortSignal) =>
  fetch(`${h.gateway.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    ...(signal ? { signal } : {}),
    body: JSON.stringify({ model, messages: [{ role: 'user', content: PROMPT }], max_tokens: 8, stream }),
  });

/** One sample of the gateway's /metrics, or 0 when absent. */
async function gatewayMetric(h: Harness, series: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${h.gateway.metricsPort}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? 0 : Number(line.slice(series.length + 1));
}

/** Sends N streamed requests whose decode leg sits in front of D1's engine, and abandons each once the prefill has answered. */
async function abandonAfterPrefill(h: Harness, pd: VllmPd): Promise<void> {
  pd.d1.setFault({ mode: 'slow-first-byte', delayMs: LONG, count: N });
  for (let i = 0; i < N; i++) {
    const before = inferenceRequests(pd.d1).length;
    const client = new AbortController();
    const res = chat(h, 'pd', true, client.signal).catch((err: Error) => err);
    // The prefill answered (its blocks are held) and the decode request reached D1, which has not admitted it.
    await waitFor(() => inferenceRequests(pd.d1).length > before, { what: 'the decode leg at D1' });
    client.abort();
    await res;
  }
}

describe('KV-ownership-aware aborts (vLLM NIXL PD)', () => {
  describe('with the gateway releasing stranded KV (default)', () => {
    let h: Harness;
    let pd: VllmPd;
    beforeAll(async () => {
      h = await startHarness();
      pd = await vllmPd(h);
    });
    afterAll(async () => {
      await h?.close();
    });

    it('a failing decode: each stranded hand-off is released through the other decode, and the retry succeeds', async () => {
      pd.d1.setFault({ mode: 'error500', count: N });
      for (let i = 0; i < N; i++) expect((await chat(h, 'pd', false)).status).toBe(200);
      await waitFor(() => pd.p.kvHeld().blocks === 0, { what: 'the prefill to hold no KV' });
      expect(pd.p.counters()['kvLeasesExpired']).toBe(0);
      // Each request: the D1 try stranded the first hand-off, a release leg read it, the D2 retry read the second.
      expect(pd.p.counters()['kvPullsServed']).toBe(2 * N);
      const series = 'triad_gateway_kv_stranded_total{engine="vLLM",reason="decode_failed",action="release"}';
      expect(await gatewayMetric(h, series)).toBe(N);
      await waitFor(async () => (await gatewayMetric(h, 'triad_gateway_kv_releases_total{engine="vLLM",outcome="ok"}')) === N, {
        what: 'N successful releases',
      });
      const releases = inferenceRequests(pd.d2).filter((r) => (r.body as { max_tokens?: number }).max_tokens === 1);
      expect(releases).toHaveLength(N);
      expect(releases[0]?.body).toMatchObject({ stream: false, max_tokens: 1, kv_transfer_params: { do_remote_prefill: true } });
      const line = await waitFor(() => accessLines(h).at(N - 1), { what: 'N access lines' });
      expect(line['kv_stranded']).toEqual([
        { engine: 'vLLM', prefill: 'p', decode: 'd1', reason: 'decode_failed', action: 'release', via: 'd2' },
      ]);
    });

    it('a client that leaves after the prefill answered: the KV is released, not left to the lease', async () => {
      await abandonAfterPrefill(h, pd);
      await waitFor(() => pd.p.kvHeld().blocks === 0, { what: 'the prefill to hold no KV' });
      expect(pd.p.counters()['kvLeasesExpired']).toBe(0);
      const series = 'triad_gateway_kv_stranded_total{engine="vLLM",reason="client_aborted",action="release"}';
      await waitFor(async () => (await gatewayMetric(h, series)) === N, { what: 'N stranded hand-offs counted' });
      // Access lines are written when each request ends, a moment after the client's abort.
      const lines = await waitFor(
        () => {
          const ended = accessLines(h).filter((l) => l['status_code'] === 499);
          return ended.length === N ? ended : undefined;
        },
        { what: 'N access lines with 499' },
      );
      expect(lines[0]?.['kv_stranded']).toEqual([
        { engine: 'vLLM', prefill: 'p', decode: 'd1', reason: 'client_aborted', action: 'release', via: 'd2' },
      ]);
    });
  });

  describe('baseline: TRIAD_KV_RELEASE=false', () => {
    let h: Harness;
    let pd: VllmPd;
    beforeAll(async () => {
      h = await startHarness({ config: { kvRelease: false } });
      pd = await vllmPd(h);
    });
    afterAll(async () => {
      await h?.close();
    });

    it('a failing decode leaves one hand-off per request on the prefill until its lease ends', async () => {
      pd.d1.setFault({ mode: 'error500', count: N });
      for (let i = 0; i < N; i++) expect((await chat(h, 'pd', false)).status).toBe(200);
      expect(pd.p.kvHeld().requests).toBe(N);
      const series = 'triad_gateway_kv_stranded_total{engine="vLLM",reason="decode_failed",action="none"}';
      expect(await gatewayMetric(h, series)).toBe(N);
    });

    it('so do clients that leave after the prefill answered', async () => {
      await abandonAfterPrefill(h, pd);
      const series = 'triad_gateway_kv_stranded_total{engine="vLLM",reason="client_aborted",action="none"}';
      await waitFor(async () => (await gatewayMetric(h, series)) === N, { what: 'N stranded hand-offs counted' });
      expect(pd.p.kvHeld().requests).toBe(2 * N);
      expect(pd.p.counters()['kvLeasesExpired']).toBe(0);
    });
  });
});

describe('KV-ownership-aware aborts (SGLang PD)', () => {
  let h: Harness;
  let p: SimEngineHandle;
  let d: SimEngineHandle;
  beforeAll(async () => {
    h = await startHarness();
    p = await h.startSim({ engine: 'sglang', role: 'prefill', model: MODEL, bootstrapPort: 0 });
    // The decode waits for its room as long as SGLang's default waiting timeout would let it (5 min here too).
    d = await h.startSim({ engine: 'sglang', role: 'decode', model: MODEL, bootstrapTimeoutMs: 300_000 });
    await h.putServer('sg', {
      model: MODEL,
      inferenceEngine: 'SGLang',
      workloadPort: { port: 30000, protocol: 'http' },
      workloadSelector: { matchLabels: { app: 'sg' }, pdGroup: { groupKey: 'g', prefillLabels: { r: 'p' }, decodeLabels: { r: 'd' } } },
    });
    await h.putRoute('sg', { modelName: 'sg', rules: [{ targetModels: [{ modelServerName: 'sg', weight: 100 }] }] });
    const prefill = await h.putEndpoint('sg', 'p', 'prefill', p, { group: 'g1' });
    const decode = await h.putEndpoint('sg', 'd', 'decode', d, { group: 'g1' });
    h.decide = (r) => ({ id: r.id, ok: true, mode: 'pd', encoders: [], attempts: [{ prefill, endpoint: decode }] });
    await h.waitForModel('sg');
  });
  afterAll(async () => {
    await h?.close();
  });

  it('baseline: a decode whose prefill never delivers keeps its pre-allocated KV while nobody aborts it', async () => {
    // What the engines do on their own: requests for rooms no prefill computes (the prefill died), left open.
    const clients = Array.from({ length: N }, () => new AbortController());
    const sent = clients.map((c, i) =>
      fetch(`${d.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        signal: c.signal,
        body: JSON.stringify({
          model: MODEL,
          messages: [{ role: 'user', content: PROMPT }],
          max_tokens: 8,
          bootstrap_host: p.host,
          bootstrap_port: p.bootstrapPort,
          bootstrap_room: 1000 + i,
        }),
      }).catch((err: Error) => err),
    );
    await waitFor(() => d.kvHeld().requests === N, { what: 'the decode to pre-allocate for every request' });
    const held = d.kvHeld();
    expect(held.blocks).toBe(N * 14);
    // Still held: only SGLANG_DISAGGREGATION_WAITING_TIMEOUT or an abort frees them. (The test aborts them itself.)
    for (const c of clients) c.abort();
    await Promise.all(sent);
    await waitFor(() => d.kvHeld().requests === 0, { what: 'the aborts to free the decode' });
  });

  it('the client leaves while the prefill is stuck: the gateway aborts both legs and the decode frees its KV', async () => {
    p.setFault({ mode: 'hang', count: N });
    const clients = Array.from({ length: N }, () => new AbortController());
    const sent = clients.map((c) => chat(h, 'sg', true, c.signal).catch((err: Error) => err));
    await waitFor(() => d.kvHeld().requests === N, { what: 'the decode to pre-allocate for every request' });
    for (const c of clients) c.abort();
    await Promise.all(sent);
    await waitFor(() => d.kvHeld().requests === 0, { what: 'the decode to free what it pre-allocated' });
    const series = 'triad_gateway_kv_stranded_total{engine="SGLang",reason="client_aborted",action="abort_peer"}';
    await waitFor(async () => (await gatewayMetric(h, series)) === N, { what: 'N stranded hand-offs counted' });
    const line = await waitFor(
      () =>
        accessLines(h)
          .filter((l) => l['status_code'] === 499)
          .at(N - 1),
      { what: 'N access lines with 499' },
    );
    expect(line['kv_stranded']).toEqual([{ engine: 'SGLang', prefill: 'p', decode: 'd', reason: 'client_aborted', action: 'abort_peer' }]);
  });

  it('a prefill that fails: the gateway aborts the decode leg, so nothing stays pre-allocated', async () => {
    p.setFault({ mode: 'error500', count: N });
    for (let i = 0; i < N; i++) expect((await chat(h, 'sg', true)).status).toBe(502);
    await waitFor(() => d.kvHeld().requests === 0, { what: 'the decode to hold nothing' });
    const series = 'triad_gateway_kv_stranded_total{engine="SGLang",reason="prefill_failed",action="abort_peer"}';
    expect(await gatewayMetric(h, series)).toBe(N);
  });
});
