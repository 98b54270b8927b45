import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateApiKey, hashApiKey } from '@triad/admission';
import type { SimEngineHandle } from '@triad/engine-sim';
import { waitFor } from '@triad/testing';
import { inferenceRequests, startHarness, type Harness } from './support/harness';
import { startMemoryTracing, type MemoryTracing } from './support/memory-tracing';

const MODEL = 'm-integrations';

describe('gateway with the tracing (libs/telemetry) and admission (libs/admission) hooks installed', () => {
  let h: Harness;
  let p: SimEngineHandle;
  let d: SimEngineHandle;
  let tracing: MemoryTracing;
  const dir = mkdtempSync(join(tmpdir(), 'triad-gw-admission-'));
  const key = generateApiKey();

  beforeAll(async () => {
    tracing = startMemoryTracing();
    const config = join(dir, 'admission.json');
    writeFileSync(
      config,
      JSON.stringify({
        auth: {
          apiKeys: {
            keys: [
              {
                name: 'team-a',
                id: key.id,
                hash: hashApiKey(key.key, { N: 1024, r: 8, p: 1 }),
                models: ['pd'],
              },
            ],
          },
        },
      }),
    );
    h = await startHarness({ config: { admissionConfig: config }, tracing: true });
    p = await h.startSim({ engine: 'vllm', role: 'prefill', host: '127.0.10.1', model: MODEL });
    d = await h.startSim({ engine: 'vllm', role: 'decode', host: '127.0.10.2', model: MODEL });
    const server = {
      model: MODEL,
      inferenceEngine: 'vLLM' as const,
      kvConnector: { type: 'nixl' as const },
      workloadPort: { port: 8000, protocol: 'http' as const },
    };
    await h.putServer('pd', {
      ...server,
      workloadSelector: { matchLabels: { a: 'pd' }, pdGroup: { groupKey: 'g', prefillLabels: { r: 'p' }, decodeLabels: { r: 'd' } } },
    });
    await h.putRoute('pd', { modelName: 'pd', rules: [{ targetModels: [{ modelServerName: 'pd', weight: 100 }] }] });
    await h.putRoute('other', { modelName: 'other', rules: [{ targetModels: [{ modelServerName: 'pd', weight: 100 }] }] });
    const pre = await h.putEndpoint('pd', 'p', 'prefill', p, { group: 'g1' });
    const dec = await h.putEndpoint('pd', 'd', 'decode', d, { group: 'g1' });
    h.decide = (r) => ({ id: r.id, ok: true, mode: 'pd', encoders: [], attempts: [{ endpoint: dec, prefill: pre }] });
    await h.waitForModel('other');
  });
  afterAll(async () => {
    await h?.close();
    await tracing?.telemetry.shutdown();
    rmSync(dir, { recursive: true, force: true });
  });

  const chat = (model: string, auth?: string) =>
    fetch(`${h.gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(auth ? { authorization: `Bearer ${auth}` } : {}) },
      body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hello' }], max_tokens: 3 }),
    });

  it('rejects requests without a key (401 with WWW-Authenticate) and keys used for another model (403), OpenAI-shaped', async () => {
    const none = await chat('pd');
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toBe('Bearer realm="triad"');
    expect(((await none.json()) as { error: { type: string } }).error.type).toBe('authentication_error');
    const wrongModel = await chat('other', key.key);
    expect(wrongModel.status).toBe(403);
  });

  it(
    'admits a valid key, and traces the request (admission event on the request span) with one span per leg whose context reaches ' +
      'the engines',
    async () => {
      p.clearRequests();
      d.clearRequests();
      const res = await chat('pd', key.key);
      expect(res.status).toBe(200);
      await res.text();
      const traceparent = inferenceRequests(d)[0]?.headers['traceparent'] as string;
      expect(traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$/);
      const traceId = traceparent.split('-')[1];
      expect((inferenceRequests(p)[0]?.headers['traceparent'] as string).split('-')[1]).toBe(traceId);
      await waitFor(
        async () => {
          await tracing.telemetry.forceFlush();
          return tracing.exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === traceId).length >= 4;
        },
        { what: 'request, schedule and leg spans exported' },
      );
      const spans = tracing.exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === traceId);
      expect(spans.length).toBeGreaterThanOrEqual(4);
      // Admission's decision is an event on the request span (the gateway hands it over as `spanOf`).
      const request = spans.find((s) => s.name === 'POST /v1/chat/completions');
      expect(request?.events.map((e) => e.name)).toContain('triad.admission.admitted');
      // Route `pd` sends the ModelServer's model: legs carry that one, the request span the client's name.
      expect(request?.attributes['gen_ai.request.model']).toBe('pd');
      const legs = spans.filter((s) => s.name === 'prefill' || s.name === 'decode');
      expect(legs.map((s) => s.attributes['gen_ai.request.model'])).toEqual([MODEL, MODEL]);
    },
  );
});
