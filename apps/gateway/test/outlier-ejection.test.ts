import { Buckets, OutlierRecordSchema, outlierKey, endpointKey } from '@triad/bus';
import type { SimEngineHandle } from '@triad/engine-sim';
import { waitFor } from '@triad/testing';
import { accessLines, startHarness, NS, type Harness } from './support/harness';

const MODEL = 'm-outlier';

describe('outlier ejection: a failing pod is remembered, shared over NATS, probed and restored', () => {
  let h: Harness;
  let bad: SimEngineHandle;
  let good: SimEngineHandle;

  beforeAll(async () => {
    // In-process scheduling: the gateway's own scheduler reads the shared outlier state, as the service does.
    h = await startHarness({ config: { scheduling: 'in-process' } });
    bad = await h.startSim({ engine: 'vllm', role: 'both', host: '127.0.18.1', model: MODEL });
    good = await h.startSim({ engine: 'vllm', role: 'both', host: '127.0.18.2', model: MODEL, latency: { decodeMsPerToken: 1 } });
    await h.putServer('od', {
      model: MODEL,
      inferenceEngine: 'vLLM',
      workloadSelector: { matchLabels: { app: 'od' } },
      workloadPort: { port: 8000, protocol: 'http' },
      trafficPolicy: { outlierDetection: { consecutiveErrors: 3, baseEjectionTime: '1s', maxEjectionTime: '5s' } },
    });
    await h.putRoute('od', { modelName: 'od', rules: [{ targetModels: [{ modelServerName: 'od', weight: 100 }] }] });
    // The failing pod looks the better one by load, so the scheduler keeps choosing it until it is ejected.
    const metrics = (kvCacheUsage: number) => ({ running: 0, waiting: 0, kvCacheUsage, scrapedAt: Date.now(), stale: false });
    await h.putEndpoint('od', 'bad', 'aggregated', bad, { metrics: metrics(0) });
    await h.putEndpoint('od', 'good', 'aggregated', good, { metrics: metrics(0.9) });
    await h.waitForModel('od');
  });
  afterAll(async () => {
    await h?.close();
  });

  const chat = (id: string) =>
    fetch(`${h.gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-request-id': id },
      // Identical prompts: prefix affinity pulls them all to the same pod.
      body: JSON.stringify({ model: 'od', max_tokens: 2, messages: [{ role: 'user', content: 'the same long prompt '.repeat(40) }] }),
    });
  const lineOf = (id: string) => accessLines(h).find((l) => l['request_id'] === id);
  const firstPod = (id: string) => ((lineOf(id)?.['endpoints'] as { aggregated?: string[] } | undefined)?.aggregated ?? [])[0];

  it('ejects the pod after consecutiveErrors failures, so later identical prompts go straight to the healthy one', async () => {
    bad.setFault({ mode: 'error500' });
    const ids = Array.from({ length: 40 }, (_, i) => `same-${i}`);
    for (const id of ids) expect((await chat(id)).status).toBe(200);
    await waitFor(() => ids.every((id) => lineOf(id) !== undefined), { what: 'access lines' });
    const firstOnBad = ids.filter((id) => firstPod(id) === 'bad');
    // Only the failures that led to the ejection paid a retry (before: 39 of 40), plus a probe each time the
    // ejection ran out on a slow run.
    const probes = ids.filter((id) => JSON.stringify(lineOf(id)?.['outliers'] ?? []).includes('probe-failed'));
    expect(ids.slice(0, 3).map(firstPod)).toEqual(['bad', 'bad', 'bad']);
    expect(firstOnBad.length).toBe(3 + probes.length);
    const ejecting = ids.map(lineOf).find((l) => Array.isArray(l?.['outliers']));
    expect(ejecting?.['outliers']).toEqual([{ endpoint: 'bad', stage: 'aggregated', action: 'ejected', reason: '5xx' }]);
    // Shared: the record is in the outliers bucket, where every gateway and scheduler replica reads it.
    const kv = await h.bus.kv(Buckets.outliers, OutlierRecordSchema);
    const stored = await kv.get(outlierKey(endpointKey(NS, 'od', 'bad'), 'aggregated'));
    expect(stored).toMatchObject({ state: 'ejected', reason: '5xx', failures: probes.length > 0 ? 1 : 3, ejections: 1 + probes.length });
    const counted = `triad_gateway_outlier_ejections_total{model_server="default/od",stage="aggregated",reason="5xx"} ${1 + probes.length}`;
    await waitFor(async () => (await (await fetch(`http://127.0.0.1:${h.gateway.metricsPort}/metrics`)).text()).includes(counted), {
      what: counted,
    });
  });

  it('probes the pod with real traffic once the ejection runs out: a failed probe ejects it for longer, a good one restores it', async () => {
    const kv = await h.bus.kv(Buckets.outliers, OutlierRecordSchema);
    const key = outlierKey(endpointKey(NS, 'od', 'bad'), 'aggregated');
    let n = 0;
    const before = (await kv.get(key))?.ejections ?? 0;
    // Still failing: the probe after the ejection fails, and the next ejection is one more in a row (twice as long).
    await waitFor(
      async () => {
        expect((await chat(`probe-fail-${n++}`)).status).toBe(200);
        return ((await kv.get(key))?.ejections ?? 0) > before;
      },
      { what: 'a failed probe and a further ejection', timeoutMs: 20_000 },
    );
    const again = await kv.get(key);
    expect(again?.state).toBe('ejected');
    expect((again?.ejectedUntil ?? 0) - (again?.ejectedAt ?? 0)).toBe(Math.min(5000, 1000 * 2 ** ((again?.ejections ?? 1) - 1)));
    bad.setFault({ mode: 'ok' });
    await waitFor(
      async () => {
        expect((await chat(`probe-ok-${n++}`)).status).toBe(200);
        return (await kv.get(key))?.state === 'healthy';
      },
      { what: 'a successful probe restoring the pod', timeoutMs: 20_000 },
    );
    await waitFor(() => accessLines(h).some((l) => JSON.stringify(l['outliers'] ?? []).includes('"restored"')), {
      what: 'restore in the log',
    });
  });
});
