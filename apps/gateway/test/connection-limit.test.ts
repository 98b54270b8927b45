import { DispatchBatchSchema, Subjects, decodeMessage, type DispatchEvent } from '@triad/bus';
import { waitFor } from '@triad/testing';
import type { SimEngineHandle } from '@triad/engine-sim';
import { inferenceRequests, startHarness, type Harness } from './support/harness';

const MODEL = 'Qwen/Qwen2.5-0.5B';

function chat(h: Harness, model: string, extra: Record<string, unknown>, signal?: AbortSignal): Promise<Response> {
  return fetch(`${h.gateway.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 4, ...extra }),
    ...(signal ? { signal } : {}),
  });
}

/**
 * A stream that has delivered its first chunk and is held open until aborted: 2,000 tokens at 20 ms each, with
 * `ignore_eos` (without it the sim stops naturally after 64–127 tokens, about 2 s, which freed a connection while a
 * test still counted it busy).
 */
async function openStream(h: Harness, model: string): Promise<AbortController> {
  const abort = new AbortController();
  const res = await chat(h, model, { stream: true, max_tokens: 2000, ignore_eos: true }, abort.signal);
  expect(res.status).toBe(200);
  const first = await (res.body as ReadableStream<Uint8Array>).getReader().read();
  expect(first.done).toBe(false);
  return abort;
}

async function waitingGauge(h: Harness, server: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${h.gateway.metricsPort}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`triad_gateway_upstream_waiting{model_server="${server}",stage="aggregated"}`));
  return line === undefined ? 0 : Number(line.split(' ').pop());
}

describe('gateway, per-endpoint connection limit (connectionPool.maxConnections)', () => {
  let h: Harness;
  let strict: SimEngineHandle;
  let patient: SimEngineHandle;
  let patientKey = '';
  const dispatched: DispatchEvent[] = [];

  beforeAll(async () => {
    h = await startHarness();
    const latency = { decodeMsPerToken: 20 };
    strict = await h.startSim({ engine: 'vllm', role: 'both', host: '127.0.0.1', model: MODEL, latency });
    patient = await h.startSim({ engine: 'vllm', role: 'both', host: '127.0.0.1', model: MODEL, latency });
    const base = { model: MODEL, inferenceEngine: 'vLLM' as const };
    await h.putServer('strict', {
      ...base,
      workloadSelector: { matchLabels: { app: 'strict' } },
      workloadPort: { port: strict.port, protocol: 'http' },
      // The budget a waiting request times out with; the held streams need their first byte within it too, so it
      // is generous for a loaded machine (the request that waits for it pays it in full, once).
      trafficPolicy: { timeout: '3s', retry: { attempts: 0, retryInterval: '100ms' } },
      connectionPool: { maxConnections: 2 },
    });
    await h.putServer('patient', {
      ...base,
      workloadSelector: { matchLabels: { app: 'patient' } },
      workloadPort: { port: patient.port, protocol: 'http' },
      connectionPool: { maxConnections: 1 },
    });
    await h.putRoute('strict', { modelName: 'strict', rules: [{ targetModels: [{ modelServerName: 'strict', weight: 100 }] }] });
    await h.putRoute('patient', { modelName: 'patient', rules: [{ targetModels: [{ modelServerName: 'patient', weight: 100 }] }] });
    const strictRef = await h.putEndpoint('strict', 'strict-0', 'aggregated', strict);
    const patientRef = await h.putEndpoint('patient', 'patient-0', 'aggregated', patient);
    patientKey = patientRef.key;
    h.decide = (r) => ({
      id: r.id,
      ok: true,
      mode: 'aggregated',
      encoders: [],
      attempts: [{ endpoint: r.modelServer === 'strict' ? strictRef : patientRef }],
    });
    h.bus.nc.subscribe(Subjects.dispatch, {
      callback: (_err, msg) => {
        const batch = decodeMessage(DispatchBatchSchema, msg.data);
        if (batch.ok) dispatched.push(...batch.value.events);
      },
    });
    await h.waitForModel('strict');
    await h.waitForModel('patient');
  });
  afterAll(async () => {
    await h?.close();
  });

  it('times a request out with the stage budget while every connection is busy (504, OpenAI error), then frees its place', async () => {
    const held = [await openStream(h, 'strict'), await openStream(h, 'strict')];
    const res = await chat(h, 'strict', {});
    expect(res.status).toBe(504);
    const err = ((await res.json()) as { error: { code: string; message: string; type: string } }).error;
    expect(err.code).toBe('GATEWAY_UPSTREAM_TIMEOUT');
    expect(err.message).toMatch(/waited 3000 ms for a free connection \(all 2 busy, 1 requests waiting\)/);
    expect(inferenceRequests(strict)).toHaveLength(2);
    expect(await waitingGauge(h, 'strict')).toBe(0);
    for (const a of held) a.abort();
    // The two streams' connections and the withdrawn waiter's place are free again: a new request goes through.
    await waitFor(async () => (await chat(h, 'strict', {})).status === 200, { what: 'a request after the streams ended' });
  });

  it('holds a request beyond the limit visibly (gauge, in flight for scheduling) and sends it when a connection frees', async () => {
    const held = await openStream(h, 'patient');
    const sentBefore = inferenceRequests(patient).length;
    const waiter = chat(h, 'patient', {});
    await waitFor(async () => (await waitingGauge(h, 'patient')) === 1, { what: 'one request waiting for a connection' });
    // The waiting leg was announced to the schedulers as started on the endpoint: it counts as in flight there.
    await waitFor(() => dispatched.filter((e) => e.type === 'start' && e.endpoint === patientKey).length === 2, {
      what: 'dispatch start events of both legs',
    });
    expect(inferenceRequests(patient)).toHaveLength(sentBefore);
    held.abort();
    const res = await waiter;
    expect(res.status).toBe(200);
    expect(((await res.json()) as { object: string }).object).toBe('chat.completion');
    expect(await waitingGauge(h, 'patient')).toBe(0);
    expect(inferenceRequests(patient)).toHaveLength(sentBefore + 1);
  });
});
