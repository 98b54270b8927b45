import type { SimEngineHandle } from '@triad/engine-sim';
import { parsePrometheusText, sumSamples } from '@triad/prom-text';
import { waitFor } from '@triad/testing';
import { get, post, SimFleet } from './helpers';

async function metric(sim: SimEngineHandle, name: string): Promise<number> {
  const { families } = parsePrometheusText((await get(`${sim.url}/metrics`)).text);
  return sumSamples(families, name) ?? NaN;
}

/** Text of about `tokens` tokens (four characters each), distinct per `tag`. */
function text(tag: string, tokens: number): string {
  return `${tag} `.padEnd(4 * tokens, `${tag.slice(0, 1)}`);
}

const image = (n: number) => ({ type: 'image_url', image_url: { url: `https://img.test/${n}.png` } });

function chat(sim: SimEngineHandle, messages: unknown[], maxTokens: number) {
  return post(`${sim.url}/v1/chat/completions`, { messages, max_tokens: maxTokens, ignore_eos: true });
}

/** A counter's growth over one call. */
async function growth(sim: SimEngineHandle, names: string[], fn: () => Promise<unknown>): Promise<Record<string, number>> {
  const before = sim.counters();
  await fn();
  const after = sim.counters();
  return Object.fromEntries(names.map((n) => [n, (after[n] ?? 0) - (before[n] ?? 0)]));
}

describe('vLLM V1 engine core (engineCore)', () => {
  const fleet = new SimFleet();
  afterAll(() => fleet.closeAll());

  const start = (engineCore: Record<string, number>, latency: Record<string, number> = {}) =>
    fleet.start({
      engine: 'vllm',
      role: 'both',
      latencyProfile: 'realistic',
      latency: { decodeMsPerToken: 4, prefillMsPer1kTokens: 20, encodeMsPerItem: 4, ...latency },
      engineCore,
    });

  it('runs at most max_num_seqs requests and queues the rest, reported on /metrics', async () => {
    const sim = await start({ maxNumSeqs: 2 });
    const answers = [0, 1, 2].map((i) => chat(sim, [{ role: 'user', content: text(`q${i}`, 40) }], 150));
    await waitFor(async () => (await metric(sim, 'vllm:num_requests_waiting')) === 1, { what: 'third request waiting' });
    expect(await metric(sim, 'vllm:num_requests_running')).toBe(2);
    expect(await metric(sim, 'vllm:kv_cache_usage_perc')).toBeGreaterThan(0);
    for (const a of await Promise.all(answers)) expect(a.json()).toMatchObject({ usage: { completion_tokens: 150 } });
    await waitFor(async () => (await metric(sim, 'vllm:num_requests_running')) === 0, { what: 'batch drained' });
    expect(await metric(sim, 'vllm:num_requests_waiting')).toBe(0);
    expect(await metric(sim, 'vllm:kv_cache_usage_perc')).toBe(0);
  });

  it('splits a long prompt into chunks of the token budget (chunked prefill)', async () => {
    const sim = await start({ maxNumBatchedTokens: 64 });
    const a = await chat(sim, [{ role: 'user', content: text('long', 1000) }], 1);
    const promptTokens = a.json<{ usage: { prompt_tokens: number } }>().usage.prompt_tokens;
    expect(promptTokens).toBeGreaterThan(1000);
    // One step per 64 prompt tokens at least; a request-level model would take one.
    expect(sim.counters()['engineSteps']).toBeGreaterThanOrEqual(Math.ceil(promptTokens / 64));
  });

  it('hits the prefix cache for a shared prompt and loses it once the pool evicted its blocks', async () => {
    // 64 blocks of 16 tokens: one 600-token prompt fits, two more push the first one's blocks out.
    const sim = await start({}, { kvCapacityTokens: 1024 });
    const a = [{ role: 'system', content: text('alpha', 600) }];
    const ask = (msgs: unknown[]) => growth(sim, ['prefixQueryTokens', 'prefixHitTokens'], () => chat(sim, msgs, 1));
    expect((await ask(a)).prefixHitTokens).toBe(0);
    const again = await ask(a);
    expect(again.prefixHitTokens).toBeGreaterThanOrEqual(576);
    expect(again.prefixHitTokens).toBeLessThan(again.prefixQueryTokens);
    await ask([{ role: 'system', content: text('beta', 600) }]);
    await ask([{ role: 'system', content: text('gamma', 600) }]);
    expect((await ask(a)).prefixHitTokens).toBe(0);
    // The engine's own counters say the same as the benchmark counters.
    expect(await metric(sim, 'vllm:prefix_cache_hits_total')).toBe(sim.counters()['prefixHitTokens']);
    expect(await metric(sim, 'vllm:prefix_cache_queries_total')).toBe(sim.counters()['prefixQueryTokens']);
  });

  it('keeps encoder outputs for later requests and evicts the oldest unreferenced ones when full', async () => {
    // Room for two images (256 embeddings each).
    const sim = await start({ encoderCacheEmbeds: 512 });
    let n = 0;
    // A distinct text before the image, so no prefix hit covers it and the engine needs its encoding.
    const ask = (img: number) =>
      growth(sim, ['encoderCacheHits', 'encoderCacheMisses'], () =>
        chat(sim, [{ role: 'user', content: [{ type: 'text', text: text(`t${n++}`, 20) }, image(img)] }], 1),
      );
    expect(await ask(1)).toEqual({ encoderCacheHits: 0, encoderCacheMisses: 1 });
    expect(await ask(1)).toEqual({ encoderCacheHits: 1, encoderCacheMisses: 0 });
    await ask(2);
    await ask(3);
    expect(await ask(1)).toEqual({ encoderCacheHits: 0, encoderCacheMisses: 1 });
    expect(await ask(3)).toEqual({ encoderCacheHits: 1, encoderCacheMisses: 0 });
  });

  it('needs no encoding for an image inside a cached prefix', async () => {
    const sim = await start({ encoderCacheEmbeds: 256 });
    const msgs = [{ role: 'user', content: [image(7), { type: 'text', text: text('after', 100) }] }];
    await chat(sim, msgs, 1);
    // Two other images push image 7 out of the encoder cache; its prompt's KV blocks stay cached.
    for (const other of [8, 9]) await chat(sim, [{ role: 'user', content: [image(other)] }], 1);
    const again = await growth(sim, ['encoderCacheHits', 'encoderCacheMisses', 'prefixHitTokens'], () => chat(sim, msgs, 1));
    expect(again.prefixHitTokens).toBeGreaterThan(256);
    expect(again).toMatchObject({ encoderCacheHits: 0, encoderCacheMisses: 0 });
  });

  it('preempts the newest request when the KV pool runs out, and still finishes both', async () => {
    // 16 blocks: two requests of ~190 tokens (12 blocks each) cannot both hold their KV to the end.
    const sim = await start({ maxNumSeqs: 2 }, { kvCapacityTokens: 256 });
    const answers = await Promise.all([0, 1].map((i) => chat(sim, [{ role: 'user', content: text(`p${i}`, 30) }], 150)));
    for (const a of answers) expect(a.json()).toMatchObject({ usage: { completion_tokens: 150 } });
    expect(sim.counters()['preemptions']).toBeGreaterThan(0);
    expect(await metric(sim, 'vllm:kv_cache_usage_perc')).toBe(0);
  });

  it('frees the slot of a client that leaves while its request waits', async () => {
    const sim = await start({ maxNumSeqs: 1 });
    const first = chat(sim, [{ role: 'user', content: text('busy', 20) }], 100);
    await waitFor(async () => (await metric(sim, 'vllm:num_requests_running')) === 1, { what: 'first running' });
    const abort = new AbortController();
    const second = fetch(`${sim.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ messages: [{ role: 'user', content: 'x' }], max_tokens: 5 }),
      signal: abort.signal,
    }).catch(() => undefined);
    await waitFor(async () => (await metric(sim, 'vllm:num_requests_waiting')) === 1, { what: 'second waiting' });
    abort.abort();
    await second;
    await waitFor(async () => (await metric(sim, 'vllm:num_requests_waiting')) === 0, { what: 'waiting request left' });
    expect((await first).status).toBe(200);
  });
});
