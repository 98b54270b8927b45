import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { Buckets, OutlierRecordSchema, endpointKey, outlierKey, type OutlierRecord, type Stage } from '@triad/bus';
import type { ModelServerSpec } from '@triad/crd';
import type { SimEngineHandle, SimEngineOptions } from '@triad/engine-sim';
import { waitFor } from '@triad/testing';
import { accessLines, inferenceRequests, startHarness, NS, type Harness } from '../support/harness';
import { vllmEpdSpec } from '../support/specs';

// Issue 32, items 1 and 2, over real sockets with engine-sims that inject faults: no healthy pod is left unused
// (panic threshold, retries onto ejected pods, active probes), and a stage with no usable endpoint falls back to the
// shortcut its engines support, or fails with a 503 naming the stage when they have none.

const MODEL = 'Qwen/Qwen2.5-0.5B-Instruct';
const VL_MODEL = 'Qwen/Qwen2.5-VL-3B-Instruct';
// Long enough that per-request disaggregation keeps the prefill leg (more than maxLocalPrefillTokens uncached).
const LONG = `Summarise this report. ${'The quarterly numbers moved in every region and every product line. '.repeat(120)}`;
const FAST_EJECTION = { consecutiveErrors: 2, baseEjectionTime: '1s', maxEjectionTime: '2s' };

type Line = Record<string, unknown>;

describe('no healthy pod left unused, and stage fallback (in-process scheduling, engine-sims with faults)', () => {
  let h: Harness;
  let octet = 0;
  const host = () => `127.0.32.${++octet}`;

  beforeAll(async () => {
    h = await startHarness({ config: { scheduling: 'in-process' } });
  });
  afterAll(async () => {
    await h?.close();
  });

  const client = () => new OpenAI({ baseURL: `${h.gateway.url}/v1`, apiKey: 'x', maxRetries: 0 });
  const sim = (opts: Omit<SimEngineOptions, 'host'>) => h.startSim({ host: host(), ...opts });
  const lineOf = (id: string): Line | undefined => accessLines(h).find((l) => l['request_id'] === id);
  async function waitLine(id: string): Promise<Line> {
    await waitFor(() => lineOf(id) !== undefined, { what: `access line of ${id}` });
    return lineOf(id) as Line;
  }
  async function metric(series: string): Promise<number> {
    const text = await (await fetch(`http://127.0.0.1:${h.gateway.metricsPort}/metrics`)).text();
    const line = text.split('\n').find((l) => l.startsWith(`${series} `));
    return line === undefined ? 0 : Number(line.slice(series.length + 1));
  }
  async function outlierKv() {
    return h.bus.kv(Buckets.outliers, OutlierRecordSchema);
  }
  async function eject(server: string, pod: string, stage: Stage, ejectedAt: number, forMs = 60_000): Promise<void> {
    const record: OutlierRecord = {
      schemaVersion: 1,
      endpoint: endpointKey(NS, server, pod),
      stage,
      state: 'ejected',
      ejectedAt,
      ejectedUntil: Date.now() + forMs,
      ejections: 1,
      reason: '5xx',
      failures: 5,
      by: 'test',
    };
    await (await outlierKv()).put(outlierKey(record.endpoint, stage), record);
  }
  async function route(name: string, spec: ModelServerSpec): Promise<void> {
    await h.putServer(name, spec);
    await h.putRoute(name, { modelName: name, rules: [{ targetModels: [{ modelServerName: name, weight: 100 }] }] });
  }
  // Each request's prompt starts with its id: no engine holds it in its prefix cache, so per-request disaggregation
  // keeps the prefill leg (a decode that had prefilled the same prompt would be chosen to prefill it again).
  const prompt = (id: string) => `[${id}] ${LONG}`;
  /** A streamed chat request read to its end with the openai SDK: the text, the response headers, the id sent. */
  async function streamed(model: string, id: string, content: string = prompt(id)): Promise<{ text: string; headers: Headers }> {
    const { data, response } = await client()
      .chat.completions.create(
        { model, messages: [{ role: 'user', content }], max_tokens: 4, stream: true },
        { headers: { 'x-request-id': id } },
      )
      .withResponse();
    let text = '';
    for await (const chunk of data) text += chunk.choices[0]?.delta.content ?? '';
    return { text, headers: response.headers };
  }
  async function unary(model: string, id: string, content: unknown = prompt(id)): Promise<{ text: string; headers: Headers }> {
    const { data, response } = await client()
      .chat.completions.create(
        { model, messages: [{ role: 'user', content: content as string }], max_tokens: 4 },
        { headers: { 'x-request-id': id } },
      )
      .withResponse();
    return { text: data.choices[0]?.message.content ?? '', headers: response.headers };
  }

  describe('item 1: the incident — both aggregated pods ejected, one answers 500', () => {
    let pod1: SimEngineHandle;
    let pod2: SimEngineHandle;

    beforeAll(async () => {
      pod1 = await sim({ engine: 'vllm', role: 'both', model: MODEL });
      pod2 = await sim({ engine: 'vllm', role: 'both', model: MODEL });
      await route('incident', {
        model: MODEL,
        inferenceEngine: 'vLLM',
        workloadSelector: { matchLabels: { app: 'incident' } },
        workloadPort: { port: 8000, protocol: 'http' },
        trafficPolicy: { outlierDetection: { consecutiveErrors: 5, baseEjectionTime: '10s' } },
      });
      // pod-1 looks the better one by load, so the scheduler puts it first as long as it is a candidate.
      const metrics = (kvCacheUsage: number) => ({ running: 0, waiting: 0, kvCacheUsage, scrapedAt: Date.now(), stale: false });
      await h.putEndpoint('incident', 'pod-1', 'aggregated', pod1, { metrics: metrics(0) });
      await h.putEndpoint('incident', 'pod-2', 'aggregated', pod2, { metrics: metrics(0.9) });
      await h.waitForModel('incident');
    });

    it('streams succeed on the ejected-but-healthy pod after the other answers 500 (panic threshold), and it is restored', async () => {
      // The state the incident left: pod-2 ejected first (hung), pod-1 later (reset streams), both for a minute.
      await eject('incident', 'pod-2', 'aggregated', Date.now() - 5000);
      await eject('incident', 'pod-1', 'aggregated', Date.now() - 1000);
      const kv = await outlierKv();
      const pod2Key = outlierKey(endpointKey(NS, 'incident', 'pod-2'), 'aggregated');
      pod1.setFault({ mode: 'error500' });
      try {
        const ids = Array.from({ length: 6 }, (_, i) => `incident-${i}`);
        for (const id of ids) expect((await streamed('incident', id)).text.length).toBeGreaterThan(0);
        const first = await waitLine(ids[0]);
        // Before: one attempt on pod-1 and a 502, pod-2 never tried. Now: pod-1, then pod-2.
        expect(first['status_code']).toBe(200);
        expect(first['upstream_attempts']).toBe(2);
        expect((first['endpoints'] as { aggregated: string[] }).aggregated).toEqual(['pod-1', 'pod-2']);
        for (const id of ids) expect((await waitLine(id))['status_code']).toBe(200);
        // The success on pod-2 ended its ejection: the shared record says healthy.
        await waitFor(async () => (await kv.get(pod2Key))?.state === 'healthy', { what: 'pod-2 restored by a success' });
      } finally {
        pod1.setFault({ mode: 'ok' });
      }
    });

    it('non-stream: with one pod ejected and the healthy one failing, the retry goes to the ejected pod (last resort)', async () => {
      await eject('incident', 'pod-2', 'aggregated', Date.now() - 1000);
      await (await outlierKv()).delete(outlierKey(endpointKey(NS, 'incident', 'pod-1'), 'aggregated'));
      await waitFor(
        async () => (await outlierKv()).get(outlierKey(endpointKey(NS, 'incident', 'pod-1'), 'aggregated')).then((r) => r === undefined),
        {
          what: 'pod-1 healthy again',
        },
      );
      pod1.setFault({ mode: 'error500', count: 1 });
      const id = 'last-resort-unary';
      expect((await unary('incident', id)).text.length).toBeGreaterThan(0);
      const line = await waitLine(id);
      expect(line['upstream_attempts']).toBe(2);
      expect((line['endpoints'] as { aggregated: string[] }).aggregated).toEqual(['pod-1', 'pod-2']);
    });
  });

  describe('item 1: active probes end an ejection early', () => {
    it('a probe that answers ends the ejection of a healthy pod; a pod that does not answer stays ejected', async () => {
      const up = await sim({ engine: 'vllm', role: 'both', model: MODEL });
      const down = await sim({ engine: 'vllm', role: 'both', model: MODEL });
      await route('probed', {
        model: MODEL,
        inferenceEngine: 'vLLM',
        workloadSelector: { matchLabels: { app: 'probed' } },
        workloadPort: { port: 8000, protocol: 'http' },
        trafficPolicy: { outlierDetection: { ...FAST_EJECTION, probe: { path: '/health', interval: '200ms', timeout: '1s' } } },
      });
      await h.putEndpoint('probed', 'up', 'aggregated', up);
      await h.putEndpoint('probed', 'down', 'aggregated', down);
      await h.waitForModel('probed');
      await down.close();
      await eject('probed', 'up', 'aggregated', Date.now(), 120_000);
      await eject('probed', 'down', 'aggregated', Date.now(), 120_000);
      const kv = await outlierKv();
      await waitFor(async () => (await kv.get(outlierKey(endpointKey(NS, 'probed', 'up'), 'aggregated')))?.state === 'healthy', {
        what: 'the answering pod restored by its probe',
      });
      const probes = up.requests().filter((r) => r.method === 'GET' && r.path === '/health');
      expect(probes.length).toBeGreaterThan(0);
      // The closed pod failed every probe meanwhile: still ejected, with its ejection window intact.
      const downRecord = await kv.get(outlierKey(endpointKey(NS, 'probed', 'down'), 'aggregated'));
      expect(downRecord?.state).toBe('ejected');
      expect(downRecord?.ejectedUntil ?? 0).toBeGreaterThan(Date.now());
    });
  });

  describe('item 2: a whole prefill stage down', () => {
    let decode: SimEngineHandle;
    let prefills: SimEngineHandle[];

    beforeAll(async () => {
      decode = await sim({ engine: 'vllm', role: 'decode', model: MODEL, kvConnector: 'nixl' });
      prefills = [
        await sim({ engine: 'vllm', role: 'prefill', model: MODEL, kvConnector: 'nixl' }),
        await sim({ engine: 'vllm', role: 'prefill', model: MODEL, kvConnector: 'nixl' }),
      ];
      await route('pd-nixl', {
        model: MODEL,
        inferenceEngine: 'vLLM',
        kvConnector: { type: 'nixl' },
        workloadPort: { port: 8000, protocol: 'http' },
        workloadSelector: {
          matchLabels: { app: 'pd-nixl' },
          pdGroup: { groupKey: 'g', prefillLabels: { r: 'p' }, decodeLabels: { r: 'd' } },
        },
        trafficPolicy: { outlierDetection: FAST_EJECTION },
      });
      await h.putEndpoint('pd-nixl', 'd', 'decode', decode, { group: 'g1' });
      await h.putEndpoint('pd-nixl', 'p0', 'prefill', prefills[0], { group: 'g1' });
      await h.putEndpoint('pd-nixl', 'p1', 'prefill', prefills[1], { group: 'g1' });
      await h.waitForModel('pd-nixl');
    });

    const prefillLegs = () => prefills.reduce((n, p) => n + inferenceRequests(p).length, 0);

    it('vLLM PD (NIXL): both prefills failing → the decode prefills itself, marked; then ejected → skipped up front; recovered → normal path', async () => {
      const fallbacksBefore = decode.counters()['localPrefillFallbacks'] ?? 0;
      const failedBefore = await metric('triad_gateway_stage_fallback_total{stage="prefill",reason="all_failed"}');
      for (const p of prefills) p.setFault({ mode: 'error500' });
      try {
        // Every prefill try fails: the request still succeeds, its decode prefilling (stream and not).
        const legsBefore = prefillLegs();
        const s = await streamed('pd-nixl', 'pd-down-stream');
        expect(s.text.length).toBeGreaterThan(0);
        expect(s.headers.get('x-triad-stage-fallback')).toBe('prefill');
        expect(prefillLegs()).toBeGreaterThan(legsBefore); // the prefill legs ran (and failed) first
        expect((await waitLine('pd-down-stream'))['stage_fallback']).toEqual([{ stage: 'prefill', reason: 'all_failed' }]);
        const u = await unary('pd-nixl', 'pd-down-unary');
        expect(u.text.length).toBeGreaterThan(0);
        expect(u.headers.get('x-triad-stage-fallback')).toBe('prefill');
        expect(decode.counters()['localPrefillFallbacks']).toBeGreaterThanOrEqual(fallbacksBefore + 2);
        expect(await metric('triad_gateway_stage_fallback_total{stage="prefill",reason="all_failed"}')).toBeGreaterThanOrEqual(
          failedBefore + 2,
        );
        // Both prefills are ejected now (2 failures each): the scheduler skips the stage without trying it.
        let n = 0;
        let skipped: Line | undefined;
        await waitFor(
          async () => {
            const id = `pd-ejected-${n++}`;
            const before = prefillLegs();
            const r = await streamed('pd-nixl', id);
            expect(r.headers.get('x-triad-stage-fallback')).toBe('prefill');
            const line = await waitLine(id);
            if (JSON.stringify(line['stage_fallback']) === JSON.stringify([{ stage: 'prefill', reason: 'all_ejected' }])) {
              expect(prefillLegs()).toBe(before);
              skipped = line;
            }
            return skipped !== undefined;
          },
          { what: 'a request that skipped the ejected prefill stage up front' },
        );
        expect(skipped?.['status_code']).toBe(200);
      } finally {
        for (const p of prefills) p.setFault({ mode: 'ok' });
      }
      // The stage recovers (the 1 s ejections run out): requests take the prefill leg again, unmarked.
      let m = 0;
      await waitFor(
        async () => {
          const before = prefillLegs();
          const r = await streamed('pd-nixl', `pd-recovered-${m++}`);
          return r.headers.get('x-triad-stage-fallback') === null && prefillLegs() > before;
        },
        { what: 'the normal P→D path again', timeoutMs: 30_000 },
      );
    });

    it('vLLM PD over the plain http connector has no shortcut: a prefill failure is not hidden, no ready prefill is a 503 naming the stage', async () => {
      const d = await sim({ engine: 'vllm', role: 'decode', model: MODEL });
      const p = await sim({ engine: 'vllm', role: 'prefill', model: MODEL });
      await route('pd-http', {
        model: MODEL,
        inferenceEngine: 'vLLM',
        kvConnector: { type: 'http' },
        workloadPort: { port: 8000, protocol: 'http' },
        workloadSelector: {
          matchLabels: { app: 'pd-http' },
          pdGroup: { groupKey: 'g', prefillLabels: { r: 'p' }, decodeLabels: { r: 'd' } },
        },
      });
      await h.putEndpoint('pd-http', 'd', 'decode', d, { group: 'g1' });
      await h.putEndpoint('pd-http', 'p', 'prefill', p, { group: 'g1' });
      await h.waitForModel('pd-http');
      p.setFault({ mode: 'error500' });
      try {
        const err = await unary('pd-http', 'pd-http-down').catch((e: unknown) => e);
        expect(err).toBeInstanceOf(OpenAI.APIError);
        expect((err as InstanceType<typeof OpenAI.APIError>).status).toBe(502);
        expect((err as InstanceType<typeof OpenAI.APIError>).message).toMatch(/prefill/);
      } finally {
        p.setFault({ mode: 'ok' });
      }
      await h.putEndpoint('pd-http', 'p', 'prefill', p, { group: 'g1', ready: false });
      await waitFor(
        async () => {
          const e = await unary('pd-http', `pd-http-none-${Date.now()}`).catch((x: unknown) => x);
          return e instanceof OpenAI.APIError && e.status === 503;
        },
        { what: 'the not-ready prefill seen by the gateway' },
      );
      const e = (await unary('pd-http', 'pd-http-none').catch((x: unknown) => x)) as InstanceType<typeof OpenAI.APIError>;
      expect(e.status).toBe(503);
      expect(e.message).toMatch(/prefill.*no fallback: KV connector 'http'/);
    });

    it('SGLang PD has no shortcut: no ready prefill is a 503 naming the stage', async () => {
      const d = await sim({ engine: 'sglang', role: 'decode', model: MODEL });
      await route('sgl-pd', {
        model: MODEL,
        inferenceEngine: 'SGLang',
        workloadPort: { port: 8000, protocol: 'http' },
        workloadSelector: {
          matchLabels: { app: 'sgl-pd' },
          pdGroup: { groupKey: 'g', prefillLabels: { r: 'p' }, decodeLabels: { r: 'd' } },
        },
      });
      await h.putEndpoint('sgl-pd', 'd', 'decode', d, { group: 'g1' });
      await h.waitForModel('sgl-pd');
      const e = (await streamed('sgl-pd', 'sgl-none').catch((x: unknown) => x)) as InstanceType<typeof OpenAI.APIError>;
      expect(e).toBeInstanceOf(OpenAI.APIError);
      expect(e.status).toBe(503);
      expect(e.message).toMatch(/prefill.*no fallback: SGLang/);
      expect(inferenceRequests(d)).toHaveLength(0);
    });
  });

  describe('item 2: a whole encode stage down (vLLM EPD)', () => {
    const image = { type: 'image_url', image_url: { url: 'https://example.com/chart.png' } };
    const content = (id: string) => [{ type: 'text', text: prompt(id) }, image];

    let ecDir: string;
    let encoders: SimEngineHandle[];
    let prefill: SimEngineHandle;
    let decode: SimEngineHandle;

    beforeAll(async () => {
      ecDir = mkdtempSync(join(tmpdir(), 'triad-i32-ec-'));
      encoders = [
        await sim({ engine: 'vllm', role: 'encode', model: VL_MODEL, ecConnector: 'shared-storage', sharedEcDir: ecDir }),
        await sim({ engine: 'vllm', role: 'encode', model: VL_MODEL, ecConnector: 'shared-storage', sharedEcDir: ecDir }),
      ];
      prefill = await sim({ engine: 'vllm', role: 'prefill', model: VL_MODEL, ecConnector: 'shared-storage', sharedEcDir: ecDir });
      decode = await sim({ engine: 'vllm', role: 'decode', model: VL_MODEL });
      await route(
        'epd-ss',
        vllmEpdSpec(VL_MODEL, 'epd-ss', {
          ecConnector: { type: 'shared-storage', enableMmEmbeds: false, maxEncoderBatch: 16, reencodeAttempts: 1 },
          trafficPolicy: { outlierDetection: FAST_EJECTION },
        }),
      );
      await h.putEndpoint('epd-ss', 'e0', 'encode', encoders[0], { group: 'g1' });
      await h.putEndpoint('epd-ss', 'e1', 'encode', encoders[1], { group: 'g1' });
      await h.putEndpoint('epd-ss', 'p', 'prefill', prefill, { group: 'g1' });
      await h.putEndpoint('epd-ss', 'd', 'decode', decode, { group: 'g1' });
      await h.waitForModel('epd-ss');
    });
    afterAll(() => {
      if (ecDir !== undefined) rmSync(ecDir, { recursive: true, force: true });
    });

    it('shared-storage EC: both encoders failing → the prefill encodes the image itself, marked; recovered → the encoders again', async () => {
      const encodeLegs = () => encoders.reduce((n, e) => n + inferenceRequests(e).length, 0);
      const localBefore = prefill.counters()['localEncodes'] ?? 0;
      for (const e of encoders) e.setFault({ mode: 'error500' });
      try {
        const before = encodeLegs();
        const r = await streamed('epd-ss', 'epd-encoders-down', content('epd-encoders-down') as unknown as string);
        expect(r.text.length).toBeGreaterThan(0);
        expect(r.headers.get('x-triad-stage-fallback')).toBe('encode');
        expect(encodeLegs()).toBeGreaterThan(before); // the encoders were tried first
        expect(prefill.counters()['localEncodes']).toBeGreaterThan(localBefore);
        expect(inferenceRequests(prefill).length).toBeGreaterThan(0); // the prefill leg ran
        expect((await waitLine('epd-encoders-down'))['stage_fallback']).toEqual([{ stage: 'encode', reason: 'all_failed' }]);
      } finally {
        for (const e of encoders) e.setFault({ mode: 'ok' });
      }
      let n = 0;
      await waitFor(
        async () => {
          const before = encodeLegs();
          const id = `epd-recovered-${n++}`;
          const parts = [
            { type: 'text', text: prompt(id) },
            { ...image, image_url: { url: `https://example.com/${id}.png` } },
          ];
          const r = await streamed('epd-ss', id, parts as unknown as string);
          return r.headers.get('x-triad-stage-fallback') === null && encodeLegs() > before;
        },
        { what: 'the encoders used again', timeoutMs: 30_000 },
      );
    });

    it('E→P→D with the prefill stage down: the decode prefills and encodes the image itself, marked', async () => {
      const decodeEncodes = decode.counters()['localEncodes'] ?? 0;
      const decodePrefills = decode.counters()['localPrefillFallbacks'] ?? 0;
      prefill.setFault({ mode: 'error500' });
      try {
        const r = await unary('epd-ss', 'epd-prefill-down', content('epd-prefill-down'));
        expect(r.text.length).toBeGreaterThan(0);
        expect(r.headers.get('x-triad-stage-fallback')).toBe('prefill');
        expect(decode.counters()['localPrefillFallbacks']).toBe(decodePrefills + 1);
        expect(decode.counters()['localEncodes']).toBeGreaterThan(decodeEncodes);
        expect((await waitLine('epd-prefill-down'))['stage_fallback']).toEqual([{ stage: 'prefill', reason: 'all_failed' }]);
      } finally {
        prefill.setFault({ mode: 'ok' });
      }
    });

    it('Mooncake EC has no shortcut: no ready encoder is a 503 naming the stage', async () => {
      const mcPrefill = await sim({ engine: 'vllm', role: 'prefill', model: VL_MODEL, ecConnector: 'mooncake', ecControlPort: 0 });
      const mcDecode = await sim({ engine: 'vllm', role: 'decode', model: VL_MODEL });
      await route(
        'epd-mc',
        vllmEpdSpec(VL_MODEL, 'epd-mc', {
          ecConnector: { type: 'mooncake', enableMmEmbeds: false, maxEncoderBatch: 16, reencodeAttempts: 1 },
        }),
      );
      await h.putEndpoint('epd-mc', 'p', 'prefill', mcPrefill, {
        group: 'g1',
        ecControlAddresses: [...(mcPrefill.ecControlAddresses ?? [])],
      });
      await h.putEndpoint('epd-mc', 'd', 'decode', mcDecode, { group: 'g1' });
      await h.waitForModel('epd-mc');
      const e = (await unary('epd-mc', 'epd-mc-none', content('epd-mc-none')).catch((x: unknown) => x)) as InstanceType<
        typeof OpenAI.APIError
      >;
      expect(e).toBeInstanceOf(OpenAI.APIError);
      expect(e.status).toBe(503);
      expect(e.message).toMatch(/encode.*no fallback: a Mooncake EC consumer/);
      expect(inferenceRequests(mcPrefill)).toHaveLength(0);
    });
  });
});
