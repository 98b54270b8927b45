import { waitFor } from '@triad/testing';
import { inferenceRequests, startHarness, type Harness } from './support/harness';

describe('gateway graceful drain', () => {
  let h: Harness;
  afterAll(async () => {
    await h?.close();
  });

  it('stops being ready and accepting, but lets a running stream finish', async () => {
    h = await startHarness();
    const sim = await h.startSim({ engine: 'vllm', role: 'both', host: '127.0.8.1', model: 'm', latency: { decodeMsPerToken: 15 } });
    await h.putServer('s', {
      model: 'm',
      inferenceEngine: 'vLLM',
      workloadSelector: { matchLabels: { a: 'b' } },
      workloadPort: { port: 8000, protocol: 'http' },
    });
    await h.putRoute('s', { modelName: 's', rules: [{ targetModels: [{ modelServerName: 's', weight: 100 }] }] });
    const ep = await h.putEndpoint('s', 's-0', 'aggregated', sim);
    h.decide = (r) => ({ id: r.id, ok: true, mode: 'aggregated', attempts: [{ endpoint: ep }], encoders: [] });
    await h.waitForModel('s');

    const res = await fetch(`${h.gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 's', messages: [{ role: 'user', content: 'long' }], max_tokens: 40, stream: true }),
    });
    expect(res.status).toBe(200);
    const body = res.text();
    await waitFor(() => inferenceRequests(sim).length === 1, { what: 'stream started' });
    const readyz = `http://127.0.0.1:${h.gateway.metricsPort}/readyz`;
    const closing = h.gateway.close();
    await waitFor(async () => (await fetch(readyz).catch(() => undefined))?.status !== 200, { what: 'readiness off while draining' });
    await expect(fetch(`${h.gateway.url}/v1/models`)).rejects.toThrow();
    const text = await body;
    expect(text.endsWith('data: [DONE]\n\n')).toBe(true);
    expect(text.match(/"content":"[^"]+"/g)?.length).toBe(40);
    await closing;
  });
});
