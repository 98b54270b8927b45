import type { SimEngineHandle } from '@triad/engine-sim';
import { histogramTotals, parsePrometheusText, sumSamples, type MetricFamily } from '@triad/prom-text';
import { CHAT, get, post, SimFleet } from './helpers';

async function scrape(sim: SimEngineHandle): Promise<Map<string, MetricFamily>> {
  const res = await get(`${sim.url}/metrics`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8');
  const { families, errors } = parsePrometheusText(res.text);
  expect(errors).toBe(0);
  return families;
}

function family(families: Map<string, MetricFamily>, name: string): MetricFamily {
  const fam = families.get(name);
  if (!fam) throw new Error(`metric family ${name} missing`);
  return fam;
}

/** Buckets must be cumulative and end in +Inf equal to _count, per series. */
function expectWellFormedHistogram(fam: MetricFamily): void {
  const bySeries = new Map<string, { le: number; v: number }[]>();
  for (const s of fam.samples.filter((x) => x.name.endsWith('_bucket'))) {
    const { le, ...rest } = s.labels;
    const key = JSON.stringify(rest);
    bySeries.set(key, [...(bySeries.get(key) ?? []), { le: le === '+Inf' ? Infinity : Number(le), v: s.value }]);
  }
  expect(bySeries.size).toBeGreaterThan(0);
  for (const [key, buckets] of bySeries) {
    for (let i = 1; i < buckets.length; i++) expect(buckets[i].v).toBeGreaterThanOrEqual(buckets[i - 1].v);
    expect(buckets.at(-1)!.le).toBe(Infinity);
    const count = fam.samples.find((s) => s.name === `${fam.name}_count` && JSON.stringify(s.labels) === key);
    expect(count?.value).toBe(buckets.at(-1)!.v);
  }
}

describe('simulator metrics, parsed with the Prometheus text parser', () => {
  const fleet = new SimFleet();
  let vllm: SimEngineHandle;
  let sglang: SimEngineHandle;

  beforeAll(async () => {
    vllm = await fleet.start({ engine: 'vllm', role: 'both', dataParallel: 2, model: 'llama-8b', loraAdapters: ['a1'] });
    sglang = await fleet.start({ engine: 'sglang', role: 'both', dataParallel: 2, model: 'llama-8b' });
    for (const sim of [vllm, sglang]) {
      for (let i = 0; i < 4; i++) await post(`${sim.url}/v1/chat/completions`, { messages: CHAT, max_tokens: 5, stream: i % 2 === 1 });
    }
  });
  afterAll(() => fleet.closeAll());

  it('vLLM: real names and types, one series per DP engine label', async () => {
    const f = await scrape(vllm);
    for (const name of ['vllm:num_requests_running', 'vllm:num_requests_waiting', 'vllm:kv_cache_usage_perc']) {
      const fam = family(f, name);
      expect(fam.type).toBe('gauge');
      expect(fam.samples.map((s) => s.labels)).toEqual([
        { model_name: 'llama-8b', engine: '0' },
        { model_name: 'llama-8b', engine: '1' },
      ]);
    }
    for (const name of [
      'vllm:prompt_tokens_total',
      'vllm:generation_tokens_total',
      'vllm:prefix_cache_queries_total',
      'vllm:mm_cache_queries_total',
      'vllm:request_success_total',
    ]) {
      expect(family(f, name).type).toBe('counter');
    }
    expect(sumSamples(f, 'vllm:generation_tokens_total')).toBe(20);
    expect(family(f, 'vllm:generation_tokens_total').samples.map((s) => s.value)).toEqual([10, 10]);
    const success = family(f, 'vllm:request_success_total').samples.filter((s) => s.labels['finished_reason'] === 'length');
    expect(success.reduce((n, s) => n + s.value, 0)).toBe(4);
    for (const name of [
      'vllm:time_to_first_token_seconds',
      'vllm:inter_token_latency_seconds',
      'vllm:time_per_output_token_seconds',
      'vllm:e2e_request_latency_seconds',
      'vllm:request_queue_time_seconds',
    ]) {
      const fam = family(f, name);
      expect(fam.type).toBe('histogram');
      expectWellFormedHistogram(fam);
    }
    expect(histogramTotals(f, 'vllm:time_to_first_token_seconds')?.count).toBe(4);
    // 4 requests x 4 token intervals each.
    expect(histogramTotals(f, 'vllm:inter_token_latency_seconds')?.count).toBe(16);
    const ttftBuckets = family(f, 'vllm:time_to_first_token_seconds').samples.filter(
      (s) => s.name.endsWith('_bucket') && s.labels['engine'] === '0',
    );
    expect(ttftBuckets.map((s) => s.labels['le'])).toEqual([
      '0.001',
      '0.005',
      '0.01',
      '0.02',
      '0.04',
      '0.06',
      '0.08',
      '0.1',
      '0.25',
      '0.5',
      '0.75',
      '1.0',
      '2.5',
      '5.0',
      '7.5',
      '10.0',
      '20.0',
      '40.0',
      '80.0',
      '160.0',
      '640.0',
      '2560.0',
      '+Inf',
    ]);
    expect(family(f, 'vllm:lora_requests_info').samples[0].labels).toMatchObject({ max_lora: '1' });
  });

  it('vLLM: honours X-data-parallel-rank pinning', async () => {
    const before = family(await scrape(vllm), 'vllm:generation_tokens_total').samples.map((s) => s.value);
    await post(`${vllm.url}/v1/chat/completions`, { messages: CHAT, max_tokens: 3 }, { 'x-data-parallel-rank': '1' });
    const after = family(await scrape(vllm), 'vllm:generation_tokens_total').samples.map((s) => s.value);
    expect(after).toEqual([before[0], before[1] + 3]);
  });

  it('SGLang: scheduler gauges per dp_rank, tokenizer counters and histograms per model_name', async () => {
    const f = await scrape(sglang);
    for (const name of [
      'sglang:num_running_reqs',
      'sglang:num_queue_reqs',
      'sglang:token_usage',
      'sglang:cache_hit_rate',
      'sglang:gen_throughput',
    ]) {
      const fam = family(f, name);
      expect(fam.type).toBe('gauge');
      expect(fam.samples.map((s) => s.labels)).toEqual(
        [0, 1].map((r) => ({
          model_name: 'llama-8b',
          engine_type: 'unified',
          tp_rank: '0',
          pp_rank: '0',
          dp_rank: String(r),
        })),
      );
    }
    expect(sumSamples(f, 'sglang:num_running_reqs')).toBe(0);
    expect(family(f, 'sglang:generation_tokens_total')).toMatchObject({
      type: 'counter',
      samples: [{ labels: { model_name: 'llama-8b' }, value: 20 }],
    });
    expect(family(f, 'sglang:num_requests_total').samples[0].value).toBe(4);
    for (const name of ['sglang:time_to_first_token_seconds', 'sglang:inter_token_latency_seconds', 'sglang:e2e_request_latency_seconds']) {
      expect(family(f, name).type).toBe('histogram');
      expectWellFormedHistogram(family(f, name));
    }
    expect(histogramTotals(f, 'sglang:time_to_first_token_seconds')?.count).toBe(4);
  });

  it('SGLang: engine_type follows the PD role and the decode exposes its transfer queue', async () => {
    const prefill = await fleet.start({ engine: 'sglang', role: 'prefill' });
    const decode = await fleet.start({ engine: 'sglang', role: 'decode' });
    const p = await scrape(prefill);
    const d = await scrape(decode);
    expect(family(p, 'sglang:num_running_reqs').samples[0].labels).toEqual({
      model_name: 'sim-model',
      engine_type: 'prefill',
      tp_rank: '0',
      pp_rank: '0',
    });
    expect(family(d, 'sglang:num_decode_transfer_queue_reqs').samples[0].labels['engine_type']).toBe('decode');
  });
});
