import OpenAI, { APIError } from 'openai';
import type { SimEngineHandle } from '@triad/engine-sim';
import { decideByServer, inferenceRequests, startHarness, type FixedDecision, type Harness } from './support/harness';

// Requests the gateway refuses before scheduling because of vLLM's stage hand-offs:
// - a completions `prompt` list is one engine request per prompt in vLLM, but its answer carries the
//   `kv_transfer_params` of the first prompt only. Where the P→D hand-off names one prompt's KV (NIXL, Mooncake), a
//   batch is refused; elsewhere it goes to the engines as sent.
// - a client's own `kv_transfer_params` / `ec_transfer_params` would steer a pd/epd server's engines (hosts to
//   connect to, KV to hold or load); aggregated servers get them as sent.

const MODEL = 'Qwen/Qwen2.5-7B';
// Long enough to need a prefill leg (about 1,000 simulated tokens).
const LONG = `Summarise this report. ${'The quarterly numbers moved in every region and every product line. '.repeat(60)}`;

describe('gateway: requests that vLLM stage hand-offs cannot take', () => {
  let h: Harness;
  const sims: Record<string, SimEngineHandle> = {};
  const client = () => new OpenAI({ baseURL: `${h.gateway.url}/v1`, apiKey: 'x', maxRetries: 0 });

  beforeAll(async () => {
    h = await startHarness({ config: { scheduleBudgetMs: 30_000 } });
    const decisions = new Map<string, FixedDecision>();
    let octet = 1;
    const sim = async (name: string, role: 'both' | 'prefill' | 'decode', kvConnector?: 'nixl' | 'lmcache') => {
      sims[name] = await h.startSim({
        engine: 'vllm',
        role,
        model: MODEL,
        host: `127.0.10.${octet++}`,
        ...(kvConnector === 'lmcache' ? { kvConnector, lmcacheStore: 'vllm-handoff-requests' } : {}),
      });
      return sims[name];
    };
    for (const kv of ['nixl', 'lmcache'] as const) {
      const name = `pd-${kv}`;
      await h.putServer(name, {
        model: MODEL,
        inferenceEngine: 'vLLM',
        workloadPort: { port: 8000, protocol: 'http' },
        workloadSelector: { matchLabels: { app: name }, pdGroup: { groupKey: 'g', prefillLabels: { r: 'p' }, decodeLabels: { r: 'd' } } },
        kvConnector: { type: kv },
      });
      await h.putRoute(name, { modelName: name, rules: [{ targetModels: [{ modelServerName: name, weight: 100 }] }] });
      const prefill = await h.putEndpoint(name, 'p', 'prefill', await sim(`${kv}-p`, 'prefill', kv), { group: 'g1' });
      const endpoint = await h.putEndpoint(name, 'd', 'decode', await sim(`${kv}-d`, 'decode', kv), { group: 'g1' });
      decisions.set(name, { mode: 'pd', attempts: [{ prefill, endpoint }] });
    }
    await h.putServer('agg', {
      model: MODEL,
      inferenceEngine: 'vLLM',
      workloadPort: { port: 8000, protocol: 'http' },
      workloadSelector: { matchLabels: { app: 'agg' } },
    });
    await h.putRoute('agg', { modelName: 'agg', rules: [{ targetModels: [{ modelServerName: 'agg', weight: 100 }] }] });
    decisions.set('agg', {
      mode: 'aggregated',
      attempts: [{ endpoint: await h.putEndpoint('agg', 'a', 'aggregated', await sim('agg', 'both')) }],
    });
    h.decide = decideByServer(decisions);
    for (const name of decisions.keys()) await h.waitForModel(name);
  });
  afterAll(async () => {
    await h?.close();
  });

  it('refuses several prompts over a NIXL hand-off with a 400 that says why, before any engine sees them', async () => {
    const before = h.batches.length;
    for (const prompt of [
      ['first', 'second'],
      [
        [1, 2, 3],
        [4, 5],
      ],
    ]) {
      const err = await client()
        .completions.create({ model: 'pd-nixl', prompt, max_tokens: 2 })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(APIError);
      expect((err as APIError).status).toBe(400);
      expect((err as APIError).message).toContain('prompt holds 2 prompts');
      expect((err as APIError).message).toContain('KV connector nixl');
      expect((err as APIError).param).toBe('prompt');
    }
    expect(inferenceRequests(sims['nixl-p'])).toHaveLength(0);
    expect(inferenceRequests(sims['nixl-d'])).toHaveLength(0);
    expect(h.batches.length).toBe(before); // nothing was scheduled
  });

  it('serves one prompt, also as a one-entry list, through the prefill leg', async () => {
    const pulls = sims['nixl-d'].counters()['kvPullsReceived'] ?? 0;
    const prefills = inferenceRequests(sims['nixl-p']).length;
    const answer = await client().completions.create({ model: 'pd-nixl', prompt: [LONG], max_tokens: 3 });
    expect(answer.choices).toHaveLength(1);
    expect(inferenceRequests(sims['nixl-p'])).toHaveLength(prefills + 1);
    expect(sims['nixl-d'].counters()['kvPullsReceived']).toBe(pulls + 1);
  });

  it.each(['pd-lmcache', 'agg'])('leaves a batch to the engines where no hand-off names one prompt (%s)', async (model) => {
    const target = model === 'agg' ? sims['agg'] : sims['lmcache-p'];
    const before = inferenceRequests(target).length;
    // The simulator models one prompt per request and refuses the batch itself: what matters is that it got it.
    const err = await client()
      .completions.create({ model, prompt: ['first', 'second'], max_tokens: 2 })
      .catch((e: unknown) => e);
    expect((err as APIError).message).not.toContain('prompt holds');
    expect(inferenceRequests(target).length).toBe(before + 1);
    expect(inferenceRequests(target).at(-1)?.body).toMatchObject({ prompt: ['first', 'second'] });
  });

  it.each([
    ['kv_transfer_params', { do_remote_prefill: true, remote_host: '10.9.9.9', remote_port: 5600, remote_block_ids: [1] }],
    ['ec_transfer_params', { peer_host: '10.9.9.9', peer_port: 7000 }],
  ])("refuses a client's own %s on a pd server, and no engine sees it", async (field, value) => {
    const before = [inferenceRequests(sims['nixl-p']).length, inferenceRequests(sims['nixl-d']).length];
    const err = await client()
      .chat.completions.create({ model: 'pd-nixl', messages: [{ role: 'user', content: LONG }], max_tokens: 2, [field]: value } as never)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(APIError);
    expect((err as APIError).status).toBe(400);
    expect((err as APIError).param).toBe(field);
    expect((err as APIError).message).toContain(`'${field}' is set by the gateway`);
    expect([inferenceRequests(sims['nixl-p']).length, inferenceRequests(sims['nixl-d']).length]).toEqual(before);
  });

  it("passes a client's kv_transfer_params to an aggregated server as sent", async () => {
    const answer = await client().chat.completions.create({
      model: 'agg',
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 2,
      kv_transfer_params: { note: 'as sent' },
    } as never);
    expect(answer.choices).toHaveLength(1);
    expect(inferenceRequests(sims['agg']).at(-1)?.body).toMatchObject({ kv_transfer_params: { note: 'as sent' } });
  });
});
