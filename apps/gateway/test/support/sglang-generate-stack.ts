import type { SimEngineHandle } from '@triad/engine-sim';
import { waitFor } from '@triad/testing';
import { startHarness, type Harness } from './harness';

// A gateway (in-process scheduling) in front of SGLang sims for `/generate` tests: one aggregated engine and one
// prefill/decode pair, routed as `<prefix>-agg`, `<prefix>-pd`, and `<prefix>-limited` (the aggregated engine under an
// output-token rate limit whose month-long window cannot roll over while a test runs).

const MODEL = 'meta-llama/Llama-3.1-8B-Instruct';

export interface SglangGenerateStack {
  readonly h: Harness;
  readonly agg: SimEngineHandle;
  readonly p: SimEngineHandle;
  readonly d: SimEngineHandle;
  /** POSTs `body` as JSON to the gateway's `path` (default `/generate`). */
  post(body: Record<string, unknown>, path?: string): Promise<Response>;
  /** The value of the gateway's first `name` sample whose labels include every `labels` pair (0 when there is none). */
  sample(name: string, labels: Record<string, string>): Promise<number>;
  /**
   * Sends one `/generate` request for `model`, expects 200, waits until the gateway has ended it (its request counter
   * moved), and returns the answer's text and what the token counter gained.
   */
  counted(model: string, body: Record<string, unknown>): Promise<{ text: string; input: number; output: number }>;
  close(): Promise<void>;
}

/** `host`: the sims' first three octets (each test file its own, e.g. `127.0.61`). */
export async function startSglangGenerateStack(options: {
  readonly prefix: string;
  readonly host: string;
  readonly outputTokensPerUnit: number;
}): Promise<SglangGenerateStack> {
  const { prefix, host } = options;
  const h = await startHarness({ config: { scheduling: 'in-process' } });
  try {
    const agg = await h.startSim({ engine: 'sglang', role: 'both', host: `${host}.1`, model: MODEL });
    const p = await h.startSim({ engine: 'sglang', role: 'prefill', host: `${host}.2`, model: MODEL, bootstrapPort: 0 });
    const d = await h.startSim({ engine: 'sglang', role: 'decode', host: `${host}.3`, model: MODEL });
    await h.putServer('agg', {
      model: MODEL,
      inferenceEngine: 'SGLang',
      workloadPort: { port: 30000, protocol: 'http' },
      workloadSelector: { matchLabels: { app: 'agg' } },
    });
    await h.putServer('pd', {
      model: MODEL,
      inferenceEngine: 'SGLang',
      workloadPort: { port: 30000, protocol: 'http' },
      workloadSelector: { matchLabels: { app: 'pd' }, pdGroup: { groupKey: 'g', prefillLabels: { r: 'p' }, decodeLabels: { r: 'd' } } },
    });
    const on = (server: string) => [{ targetModels: [{ modelServerName: server, weight: 100 }] }];
    await h.putRoute(`${prefix}-agg`, { modelName: `${prefix}-agg`, rules: on('agg') });
    await h.putRoute(`${prefix}-pd`, { modelName: `${prefix}-pd`, rules: on('pd') });
    await h.putRoute(`${prefix}-limited`, {
      modelName: `${prefix}-limited`,
      rules: on('agg'),
      rateLimit: { outputTokensPerUnit: options.outputTokensPerUnit, unit: 'month' },
    });
    await h.putEndpoint('agg', 'a', 'aggregated', agg);
    await h.putEndpoint('pd', 'p', 'prefill', p, { group: 'g1' });
    await h.putEndpoint('pd', 'd', 'decode', d, { group: 'g1' });
    for (const model of ['agg', 'pd', 'limited']) await h.waitForModel(`${prefix}-${model}`);

    const post = (body: Record<string, unknown>, path = '/generate'): Promise<Response> =>
      fetch(`${h.gateway.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const sample = async (name: string, labels: Record<string, string>): Promise<number> => {
      const text = await (await fetch(`http://127.0.0.1:${h.gateway.metricsPort}/metrics`)).text();
      const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
      const line = text.split('\n').find((l) => l.startsWith(`${name}{`) && wanted.every((w) => l.includes(w)));
      return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(' ') + 1));
    };
    const counted = async (model: string, body: Record<string, unknown>) => {
      const labels = { model, path: '/generate' };
      const requests = await sample('kthena_router_requests_total', { ...labels, status_code: '200' });
      const input = await sample('kthena_router_tokens_total', { ...labels, token_type: 'input' });
      const output = await sample('kthena_router_tokens_total', { ...labels, token_type: 'output' });
      const res = await post({ model, ...body });
      expect(res.status).toBe(200);
      const text = await res.text();
      await waitFor(async () => (await sample('kthena_router_requests_total', { ...labels, status_code: '200' })) > requests, {
        what: 'the request to end',
      });
      return {
        text,
        input: (await sample('kthena_router_tokens_total', { ...labels, token_type: 'input' })) - input,
        output: (await sample('kthena_router_tokens_total', { ...labels, token_type: 'output' })) - output,
      };
    };
    return { h, agg, p, d, post, sample, counted, close: () => h.close() };
  } catch (err) {
    await h.close();
    throw err;
  }
}
