import type { SimEngineHandle } from '@triad/engine-sim';
import { waitFor } from '@triad/testing';
import { startHarness, type Harness } from './support/harness';

// Issue 19: `ModelRoute.spec.rateLimit` holds with no admission config, as in Kthena; the budget lives in the
// NATS KV bucket the admission library uses by default.

const MODEL = 'sim-model';
/** 52 characters in one user message: the gateway estimates ceil(80 / 4) = 20 input tokens (ChatML framing). */
const TEXT = 'Count these tokens exactly, twenty of them in total.';
const chat = (model: string, maxTokens = 4) => ({ model, max_tokens: maxTokens, messages: [{ role: 'user', content: TEXT }] });

interface OpenAiError {
  error: { message: string; type: string; param: unknown; code: string };
}

async function post(h: Harness, body: unknown): Promise<{ status: number; headers: Headers; text: string }> {
  const res = await fetch(`${h.gateway.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

async function exceededCount(h: Harness, model: string, limitType: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${h.gateway.metricsPort}/metrics`)).text();
  const line = text
    .split('\n')
    .find(
      (l) =>
        l.startsWith('kthena_router_rate_limit_exceeded_total{') &&
        l.includes(`model="${model}"`) &&
        l.includes(`limit_type="${limitType}"`),
    );
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(' ') + 1));
}

describe('ModelRoute.spec.rateLimit without --admission-config', () => {
  let h: Harness;
  let sim: SimEngineHandle;

  beforeAll(async () => {
    h = await startHarness();
    sim = await h.startSim({ engine: 'vllm', role: 'both', host: '127.0.0.1', model: MODEL });
    await h.putServer('agg', {
      model: MODEL,
      inferenceEngine: 'vLLM',
      workloadSelector: { matchLabels: { app: 'agg' } },
      workloadPort: { port: sim.port, protocol: 'http' },
    });
    const target = [{ targetModels: [{ modelServerName: 'agg', weight: 100 }] }];
    // Month-long windows: a window cannot roll over while the test runs.
    await h.putRoute('input-limited', { modelName: 'input-limited', rules: target, rateLimit: { inputTokensPerUnit: 40, unit: 'month' } });
    await h.putRoute('output-limited', {
      modelName: 'output-limited',
      rules: target,
      rateLimit: { outputTokensPerUnit: 8, unit: 'month' },
    });
    await h.putRoute('unlimited', { modelName: 'unlimited', rules: target });
    const ep = await h.putEndpoint('agg', 'agg-0', 'aggregated', sim);
    h.decide = (r) => ({ id: r.id, ok: true, mode: 'aggregated', attempts: [{ endpoint: ep }], encoders: [] });
    await h.waitForModel('unlimited');
  });
  afterAll(async () => {
    await h?.close();
  });

  it('admits input tokens up to the limit, then answers an OpenAI-shaped 429 with Retry-After', async () => {
    expect((await post(h, chat('input-limited'))).status).toBe(200);
    expect((await post(h, chat('input-limited'))).status).toBe(200);
    const refused = await post(h, chat('input-limited'));
    expect(refused.status).toBe(429);
    const retryAfter = Number(refused.headers.get('retry-after'));
    expect(Number.isInteger(retryAfter) && retryAfter >= 1).toBe(true);
    const body = JSON.parse(refused.text) as OpenAiError;
    expect(body).toEqual({
      error: {
        message: expect.stringContaining('Input token rate limit exceeded'),
        type: 'rate_limit_error',
        param: null,
        code: expect.any(String),
      },
    });
    expect(await exceededCount(h, 'input-limited', 'input')).toBeGreaterThanOrEqual(1);
  });

  it('counts the output tokens the engine reported against outputTokensPerUnit', async () => {
    expect((await post(h, chat('output-limited', 4))).status).toBe(200);
    expect((await post(h, chat('output-limited', 4))).status).toBe(200);
    const refused = await post(h, chat('output-limited', 4));
    expect(refused.status).toBe(429);
    expect((JSON.parse(refused.text) as OpenAiError).error.message).toContain('Output token rate limit exceeded');
    expect(refused.headers.get('retry-after')).toMatch(/^[1-9][0-9]*$/);
  });

  it('leaves models whose route has no rateLimit alone, and needs no credentials', async () => {
    for (let i = 0; i < 6; i++) expect((await post(h, chat('unlimited', 16))).status).toBe(200);
  });

  it('applies a limit added to a route while the gateway runs', async () => {
    const target = [{ targetModels: [{ modelServerName: 'agg', weight: 100 }] }];
    await h.putRoute('late', { modelName: 'late', rules: target });
    await h.waitForModel('late');
    expect((await post(h, chat('late'))).status).toBe(200);
    await h.putRoute('late', { modelName: 'late', rules: target, rateLimit: { inputTokensPerUnit: 20, unit: 'month' } });
    let statuses: number[] = [];
    await waitFor(
      async () => {
        statuses = [(await post(h, chat('late'))).status];
        return statuses[0] === 429;
      },
      { what: 'the new limit in force' },
    );
    expect(statuses).toEqual([429]);
  });
});
