import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateApiKey, hashApiKey } from '@triad/admission';
import { RATE_LIMIT_UNIT_SECONDS } from '@triad/crd';
import { startSimEngine, type SimEngineHandle } from '@triad/engine-sim';
import { startNatsServer, type NatsServerHandle } from '@triad/testing';
import { kvWriter, postJson, startGatewayChild, type GatewayChild, type KvWriter } from './support/child-stack';

// Issue 8, through the real binary: two `triad gateway` processes share one nats-server (and so one admission
// budget in JetStream KV), an API key file, and a ModelRoute rate limit; an aggregated engine-sim behind them.

const MODEL = 'sim-model';
const UNIT = 'month' as const; // 30-day windows: the window cannot roll while the test runs (checked below).
const UNIT_MS = RATE_LIMIT_UNIT_SECONDS[UNIT] * 1000;
/**
 * One user message of 52 characters costs exactly 20 input tokens for both sides: the gateway's estimate is
 * ceil(len("<|im_start|>user\n" + text + "<|im_end|>\n") / 4) = ceil(80 / 4), and the engine-sim reports
 * 3 + 4 + ceil(52 / 4). Reservation and reported usage agree, so releases give nothing back and charge nothing extra.
 */
const TEXT = 'Count these tokens exactly, twenty of them in total.';
const COST = 20;
const ADMITTED = 20;
const BUDGET = ADMITTED * COST; // M = 400 input tokens per month
const PER_GATEWAY = 20; // N = 40 requests, 40 × 20 = 800 tokens: twice the budget

const chat = (model: string) => ({ model, max_tokens: 4, messages: [{ role: 'user', content: TEXT }] });

interface OpenAiError {
  error: { message: string; type: string; param: unknown; code: string };
}

/** Sums a Prometheus counter's samples whose labels include `match`. */
async function counter(gw: GatewayChild, name: string, match: Record<string, string>): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${gw.opsPort}/metrics`)).text();
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`)) continue;
    const labels = line.slice(name.length + 1, line.lastIndexOf('}'));
    if (Object.entries(match).every(([k, v]) => labels.includes(`${k}="${v}"`))) sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return sum;
}

describe('admission across two gateway replicas (child processes sharing one nats-server)', () => {
  let nats: NatsServerHandle;
  let kv: KvWriter;
  let sim: SimEngineHandle;
  let closed: GatewayChild | undefined; // failMode: closed
  let open: GatewayChild | undefined; // failMode: open
  const dir = mkdtempSync(join(tmpdir(), 'triad-admission-replicas-'));
  const key = generateApiKey();
  const url = (gw: GatewayChild | undefined) => `${gw!.url}/v1/chat/completions`;
  const bearer = (k: string) => ({ authorization: `Bearer ${k}` });

  beforeAll(async () => {
    nats = await startNatsServer();
    sim = await startSimEngine({ engine: 'vllm', role: 'both', host: '127.0.22.1', model: MODEL, latencyProfile: 'zero' });
    kv = await kvWriter(nats.url);
    await kv.putServer('agg', {
      model: MODEL,
      inferenceEngine: 'vLLM',
      workloadSelector: { matchLabels: { app: 'agg' } },
      workloadPort: { port: 8000, protocol: 'http' },
    });
    const route = (modelName: string, rateLimit?: { inputTokensPerUnit: number; unit: typeof UNIT }) =>
      kv.putRoute(modelName, {
        modelName,
        rules: [{ targetModels: [{ modelServerName: 'agg', weight: 100 }] }],
        ...(rateLimit ? { rateLimit } : {}),
      });
    await route('limited', { inputTokensPerUnit: BUDGET, unit: UNIT });
    // Requested only once NATS is down, so neither replica holds a lease for it then.
    await route('spare', { inputTokensPerUnit: 1_000_000, unit: UNIT });
    await route('forbidden');
    await kv.putEndpoint('agg', 'agg-0', 'aggregated', sim);

    // The same key file for both; they differ only in what they do when the budget store is unreachable.
    const keys = [
      {
        name: 'team-a',
        id: key.id,
        hash: hashApiKey(key.key, { N: 1024, r: 8, p: 1 }),
        tenant: 'a',
        models: ['limited', 'spare'],
      },
    ];
    const config = (failMode: 'open' | 'closed') => {
      const file = join(dir, `admission-${failMode}.json`);
      writeFileSync(file, JSON.stringify({ auth: { apiKeys: { keys } }, rateLimit: { failMode, storeTimeout: '500ms' } }));
      return file;
    };
    // One replica takes the flag, the other the environment variable.
    [closed, open] = await Promise.all([
      startGatewayChild(nats.url, { TRIAD_LOG_LEVEL: 'warn' }, ['--admission-config', config('closed')]),
      startGatewayChild(nats.url, { TRIAD_LOG_LEVEL: 'warn', TRIAD_ADMISSION_CONFIG: config('open') }),
    ]);
  }, 120_000);

  afterAll(async () => {
    await Promise.all([closed?.stop(), open?.stop()]);
    await kv?.close();
    await sim?.close();
    await nats?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('answers 401 without a key or with a bad one, and 403 for a model the key may not use, OpenAI-shaped', async () => {
    const none = await postJson(url(closed), chat('limited'));
    expect(none.status).toBe(401);
    expect(JSON.parse(none.body)).toEqual({
      error: {
        message: expect.any(String),
        type: 'authentication_error',
        param: null,
        code: 'GATEWAY_UNAUTHORIZED',
      },
    });

    // A key of the right shape with a wrong secret, and a key that is no key at all: neither is echoed back.
    for (const bad of [`sk-${key.id}_not-the-secret`, 'sk-nonsense']) {
      const res = await postJson(url(open), chat('limited'), bearer(bad));
      expect(res.status).toBe(401);
      const body = JSON.parse(res.body) as OpenAiError;
      expect(body.error).toMatchObject({ type: 'authentication_error', param: null, code: 'GATEWAY_UNAUTHORIZED' });
      expect(res.body).not.toContain(bad);
    }

    const forbidden = await postJson(url(open), chat('forbidden'), bearer(key.key));
    expect(forbidden.status).toBe(403);
    expect(JSON.parse(forbidden.body)).toEqual({
      error: {
        message: expect.stringContaining("'forbidden'"),
        type: 'permission_error',
        param: null,
        code: 'GATEWAY_FORBIDDEN',
      },
    });
    // None of these reached the engine.
    expect(sim.requests().filter((r) => r.method === 'POST')).toEqual([]);
  });

  it('admits exactly the budget (M tokens per unit) across both replicas when N requests ask for twice as much', async () => {
    sim.clearRequests();
    const windowAtStart = Math.floor(Date.now() / UNIT_MS);
    // Waves of 4 concurrent requests on each replica at once, so both spend the shared budget at the same time.
    const results: { gateway: string; status: number; retryAfter: string | null; body: string }[] = [];
    for (let wave = 0; wave < PER_GATEWAY / 4; wave++) {
      const sent = [closed!, open!].flatMap((gw, g) =>
        [0, 1, 2, 3].map(async (k) => {
          const res = await postJson(url(gw), chat('limited'), { ...bearer(key.key), 'x-request-id': `rl-${g}-${wave}-${k}` });
          results.push({
            gateway: g === 0 ? 'closed' : 'open',
            status: res.status,
            retryAfter: res.headers.get('retry-after'),
            body: res.body,
          });
        }),
      );
      await Promise.all(sent);
    }
    expect(Math.floor(Date.now() / UNIT_MS)).toBe(windowAtStart);

    expect(results).toHaveLength(2 * PER_GATEWAY);
    const ok = results.filter((r) => r.status === 200);
    const limited = results.filter((r) => r.status === 429);
    expect([ok.length, limited.length]).toEqual([ADMITTED, 2 * PER_GATEWAY - ADMITTED]);
    // Both replicas admitted part of it (the budget is shared, not split by a fixed quota).
    expect(new Set(ok.map((r) => r.gateway))).toEqual(new Set(['closed', 'open']));
    for (const r of limited) {
      expect(Number(r.retryAfter)).toBeGreaterThan(0);
      expect(Number.isInteger(Number(r.retryAfter))).toBe(true);
      expect(JSON.parse(r.body)).toEqual({
        error: {
          message: expect.stringContaining("'limited'"),
          type: 'rate_limit_error',
          param: null,
          code: 'GATEWAY_RATE_LIMITED',
        },
      });
    }
    // The engine saw exactly the admitted requests.
    expect(sim.requests().filter((r) => r.method === 'POST' && r.path === '/v1/chat/completions')).toHaveLength(ADMITTED);

    // Each replica's metrics agree with what the clients saw, and part of the budget was spent from local leases.
    const admittedBy = await Promise.all(
      [closed!, open!].map((gw) => counter(gw, 'triad_admission_decisions_total', { model: 'limited', result: 'admitted' })),
    );
    expect(admittedBy.reduce((a, b) => a + b, 0)).toBe(ADMITTED);
    const rejectedBy = await Promise.all(
      [closed!, open!].map((gw) => counter(gw, 'kthena_router_rate_limit_exceeded_total', { model: 'limited', limit_type: 'input' })),
    );
    expect(rejectedBy.reduce((a, b) => a + b, 0)).toBe(2 * PER_GATEWAY - ADMITTED);
    const local = await Promise.all([closed!, open!].map((gw) => counter(gw, 'triad_admission_budget_path_total', { path: 'local' })));
    expect(local.reduce((a, b) => a + b, 0)).toBeGreaterThan(0);
  });

  it('with NATS down, the fail-closed replica answers 503 with Retry-After and the fail-open one lets requests through', async () => {
    await nats.stop();
    try {
      const refused = await postJson(url(closed), chat('spare'), bearer(key.key));
      expect(refused.status).toBe(503);
      expect(refused.headers.get('retry-after')).toBe('1');
      expect(JSON.parse(refused.body)).toEqual({
        error: {
          message: expect.any(String),
          type: 'server_error',
          param: null,
          code: 'GATEWAY_ADMISSION_UNAVAILABLE',
        },
      });

      const passed = await postJson(url(open), chat('spare'), bearer(key.key));
      expect(passed.status).toBe(200);
      expect(await counter(open!, 'triad_admission_fail_open_total', {})).toBeGreaterThan(0);
      // Authentication does not need the store: a bad key is still refused on both.
      expect((await postJson(url(open), chat('spare'))).status).toBe(401);
    } finally {
      await nats.start();
    }
  });
});
