import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DispatchBatchSchema, Subjects, decodeMessage, type DispatchEvent, type SchedulingRequest } from '@triad/bus';
import type { ModelServerSpec } from '@triad/crd';
import type { SimEngineHandle } from '@triad/engine-sim';
import { EndpointIndex, InflightTracker, Scheduler, createInTreeRegistry, loadSchedulerConfig } from '@triad/scheduling';
import { endpointRecord, modelServerRecord } from '@triad/scheduling/testing';
import { waitFor } from '@triad/testing';
import { NS, inferenceRequests, startHarness, type Harness } from './support/harness';
import { vllmEpdSpec } from './support/specs';

const MODEL = 'Qwen/Qwen2.5-VL-3B-Instruct';
const IMAGE = 'https://example.com/cat.png';

/**
 * Per-request disaggregation end to end: libs/scheduling's real Scheduler decides (answering the gateway's
 * scheduling requests), the gateway executes the shortcut, and vLLM engine-sims serve it.
 */
describe('gateway executes per-request disaggregation (vLLM EPD, NIXL KV, shared-storage EC)', () => {
  let h: Harness;
  let ecDir: string;
  let e: SimEngineHandle;
  let p: SimEngineHandle;
  let d: SimEngineHandle;
  const index = new EndpointIndex();
  let scheduler: Scheduler;

  const useConfig = (config: object): void => {
    const loaded = loadSchedulerConfig(config, { registry: createInTreeRegistry() });
    if (!loaded.ok) throw new Error(loaded.reasons.join('; '));
    scheduler = new Scheduler({ index, tracker: new InflightTracker(), config: loaded.loaded });
  };

  beforeAll(async () => {
    ecDir = mkdtempSync(join(tmpdir(), 'triad-ec-'));
    h = await startHarness();
    e = await h.startSim({ engine: 'vllm', role: 'encode', host: '127.0.5.1', model: MODEL, sharedEcDir: ecDir });
    p = await h.startSim({ engine: 'vllm', role: 'prefill', host: '127.0.5.2', model: MODEL, sharedEcDir: ecDir });
    d = await h.startSim({ engine: 'vllm', role: 'decode', host: '127.0.5.3', model: MODEL });
    const spec: ModelServerSpec = vllmEpdSpec(MODEL, 'vl');
    await h.putServer('epd', spec);
    await h.putRoute('vl', { modelName: 'vl', rules: [{ targetModels: [{ modelServerName: 'epd', weight: 100 }] }] });
    const ms = modelServerRecord({ name: 'epd', mode: 'epd', model: MODEL });
    index.applyModelServer({ op: 'PUT', value: { ...ms, spec: { ...ms.spec, kvConnector: { type: 'nixl' } } } });
    for (const [pod, role, sim] of [
      ['e', 'encode', e],
      ['p', 'prefill', p],
      ['d', 'decode', d],
    ] as const) {
      await h.putEndpoint('epd', pod, role, sim, { group: 'g1' });
      index.applyEndpoint({
        op: 'PUT',
        value: endpointRecord({
          pod,
          role,
          group: 'g1',
          modelServer: 'epd',
          namespace: NS,
          ip: sim.host,
          port: sim.port,
          models: [MODEL],
          scrapedAt: Date.now(),
        }),
      });
    }
    useConfig({});
    h.decide = (r: SchedulingRequest) => scheduler.schedule(r);
    await h.waitForModel('vl');
  });
  afterAll(async () => {
    await h?.close();
    rmSync(ecDir, { recursive: true, force: true });
  });
  beforeEach(() => {
    for (const s of h.sims) s.clearRequests();
  });

  const chat = (content: unknown, extra: object = {}): Promise<Response> =>
    fetch(`${h.gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'vl', messages: [{ role: 'user', content }], max_tokens: 4, ...extra }),
    });
  const withImage = (text: string) => [
    { type: 'text', text },
    { type: 'image_url', image_url: { url: IMAGE } },
  ];

  it('a short text prompt goes to the decode pod as an aggregated request: no prefill leg, no kv_transfer_params', async () => {
    useConfig({});
    const res = await chat('hello there');
    expect(res.status).toBe(200);
    expect(inferenceRequests(p)).toHaveLength(0);
    const [sent] = inferenceRequests(d);
    expect(sent?.body).not.toHaveProperty('kv_transfer_params');
    expect(((await res.json()) as { choices: unknown[] }).choices).toHaveLength(1);
  });

  it('a prompt longer than maxLocalPrefillTokens keeps its prefill leg and KV hand-off', async () => {
    useConfig({ disaggregation: { maxLocalPrefillTokens: 8 } });
    const res = await chat('a prompt that is long enough to be more than eight tokens by the gateway estimate, surely');
    expect(res.status).toBe(200);
    expect(inferenceRequests(p)).toHaveLength(1);
    expect(inferenceRequests(d)[0]?.body).toHaveProperty('kv_transfer_params');
  });

  it('one uncached image is encoded by the prefill from the raw media: no encoder leg', async () => {
    useConfig({ disaggregation: { skipPrefill: false, localEncode: true } });
    const before = p.counters()['localEncodes'] ?? 0;
    const res = await chat(withImage('what is this?'));
    expect(res.status).toBe(200);
    expect(inferenceRequests(e)).toHaveLength(0);
    const sent = inferenceRequests(p)[0]?.body as {
      messages: { content: { type: string; image_url?: { url: string } }[] }[];
      ec_transfer_params?: unknown;
    };
    expect(sent.messages[0]?.content.find((c) => c.type === 'image_url')?.image_url?.url).toBe(IMAGE);
    expect(sent.ec_transfer_params).toBeUndefined();
    expect((p.counters()['localEncodes'] ?? 0) - before).toBe(1);
  });

  it('with localEncode off (the default) the same request fans out to the encoder first', async () => {
    useConfig({ disaggregation: { skipPrefill: false } });
    const res = await chat(withImage('and this?'));
    expect(res.status).toBe(200);
    expect(inferenceRequests(e)).toHaveLength(1);
    expect(inferenceRequests(p)).toHaveLength(1);
  });

  it('publishes the TTFT and TPOT it measured on each leg with the dispatch finish events, for the schedulers', async () => {
    const finished: DispatchEvent[] = [];
    const sub = h.bus.nc.subscribe(Subjects.dispatch, {
      callback: (_e, m) => {
        const d = decodeMessage(DispatchBatchSchema, m.data);
        if (d.ok) finished.push(...d.value.events.filter((e) => e.type === 'finish' && e.requestId === 'lat-1'));
      },
    });
    await h.bus.nc.flush();
    useConfig({ disaggregation: { skipPrefill: false } });
    const res = await fetch(`${h.gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-request-id': 'lat-1' },
      body: JSON.stringify({ model: 'vl', messages: [{ role: 'user', content: 'count to five' }], max_tokens: 5, stream: true }),
    });
    expect(res.status).toBe(200);
    await res.text();
    await waitFor(() => finished.length === 2, { what: 'finish events of the prefill and decode legs' });
    sub.unsubscribe();
    const byStage = Object.fromEntries(finished.map((e) => [e.stage, e]));
    // Packed legs carry no `ok` and no `outputTokens` (no scheduler reads them): the latencies are what they are for.
    expect(byStage['prefill']).toMatchObject({ ttftMs: expect.any(Number) });
    expect(byStage['prefill']?.tpotMs).toBeUndefined();
    expect(byStage['decode']).toMatchObject({ ttftMs: expect.any(Number), tpotMs: expect.any(Number) });
  });
});
