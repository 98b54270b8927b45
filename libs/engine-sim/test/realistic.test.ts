import type { SimEngineHandle } from '@triad/engine-sim';
import { parsePrometheusText, sumSamples } from '@triad/prom-text';
import { waitFor } from '@triad/testing';
import { CHAT, get, post, rawPost, SimFleet } from './helpers';

async function gauge(sim: SimEngineHandle, name: string): Promise<number> {
  const { families } = parsePrometheusText((await get(`${sim.url}/metrics`)).text);
  return sumSamples(families, name) ?? NaN;
}

describe('realistic latency profile', () => {
  const fleet = new SimFleet();
  let sim: SimEngineHandle;

  beforeAll(async () => {
    // One running slot and a few ms per token: enough to observe a queue without slowing the suite down.
    sim = await fleet.start({
      engine: 'vllm',
      role: 'both',
      latencyProfile: 'realistic',
      latency: { maxRunning: 1, decodeMsPerToken: 4, prefillMsPer1kTokens: 10 },
    });
  });
  afterAll(() => fleet.closeAll());

  it('bounds the running batch and queues the rest, with KV usage growing while requests run', async () => {
    const first = post(`${sim.url}/v1/chat/completions`, { messages: CHAT, max_tokens: 120, ignore_eos: true });
    await waitFor(async () => (await gauge(sim, 'vllm:num_requests_running')) === 1, { what: 'first request running' });
    expect(await gauge(sim, 'vllm:kv_cache_usage_perc')).toBeGreaterThan(0);
    const second = post(`${sim.url}/v1/chat/completions`, { messages: CHAT, max_tokens: 2 });
    await waitFor(async () => (await gauge(sim, 'vllm:num_requests_waiting')) === 1, { what: 'second request queued' });
    const [a, b] = await Promise.all([first, second]);
    expect(a.json()).toMatchObject({ usage: { completion_tokens: 120 } });
    expect(b.status).toBe(200);
    expect(await gauge(sim, 'vllm:num_requests_running')).toBe(0);
    expect(await gauge(sim, 'vllm:num_requests_waiting')).toBe(0);
    expect(await gauge(sim, 'vllm:kv_cache_usage_perc')).toBe(0);
  });

  it('discounts a repeated prompt through the prefix cache', async () => {
    const long = [{ role: 'user', content: 'Explain the difference between prefill and decode. '.repeat(20) }];
    await post(`${sim.url}/v1/chat/completions`, { messages: long, max_tokens: 1 });
    const before = await gauge(sim, 'vllm:prefix_cache_hits_total');
    await post(`${sim.url}/v1/chat/completions`, { messages: long, max_tokens: 1 });
    expect(await gauge(sim, 'vllm:prefix_cache_hits_total')).toBeGreaterThan(before);
  });

  it('counts a client that leaves mid-stream as an abort and frees its slot', async () => {
    const abort = new AbortController();
    const pending = rawPost(
      `${sim.url}/v1/chat/completions`,
      { messages: CHAT, max_tokens: 200, ignore_eos: true, stream: true },
      abort.signal,
    );
    await waitFor(async () => (await gauge(sim, 'vllm:num_requests_running')) === 1, { what: 'stream running' });
    abort.abort();
    await pending;
    await waitFor(() => sim.counters()['aborted'] === 1, { what: 'abort counted' });
    await waitFor(async () => (await gauge(sim, 'vllm:num_requests_running')) === 0, { what: 'slot freed' });
    const { families } = parsePrometheusText((await get(`${sim.url}/metrics`)).text);
    expect(families.get('vllm:request_success_total')!.samples.find((s) => s.labels['finished_reason'] === 'abort')!.value).toBe(1);
  });
});
