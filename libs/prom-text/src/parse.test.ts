import { parseSampleValue, parseSampleValueBytes, parsePrometheusText } from './parse';
import { histogramTotals, maxSample, sumSamples } from './aggregate';

// Shapes as vLLM (prometheus_client) and SGLang serve them: counters with _total, _created samples, histograms
// with per-series buckets, several DP ranks.
const vllm = `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="qwen"} 3.0
vllm:num_requests_running{engine="1",model_name="qwen"} 4.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="qwen"} 0.25
vllm:kv_cache_usage_perc{engine="1",model_name="qwen"} 0.5
# HELP vllm:prompt_tokens Number of prefill tokens processed.
# TYPE vllm:prompt_tokens counter
vllm:prompt_tokens_total{engine="0",model_name="qwen"} 120.0
vllm:prompt_tokens_created{engine="0",model_name="qwen"} 1.7e+09
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.001",model_name="qwen"} 0.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="qwen"} 2.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="qwen"} 2.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="qwen"} 0.5
vllm:time_to_first_token_seconds_count{engine="1",model_name="qwen"} 3.0
vllm:time_to_first_token_seconds_sum{engine="1",model_name="qwen"} 0.25
`;

describe('parsePrometheusText', () => {
  it('groups samples by family with types, help and labels', () => {
    const { families, errors } = parsePrometheusText(vllm);
    expect(errors).toBe(0);
    expect(families.get('vllm:num_requests_running')).toMatchObject({
      type: 'gauge',
      help: 'Number of requests in model execution batches.',
    });
    expect(families.get('vllm:prompt_tokens')?.samples.map((s) => s.name)).toEqual([
      'vllm:prompt_tokens_total',
      'vllm:prompt_tokens_created',
    ]);
    expect(families.get('vllm:time_to_first_token_seconds')?.samples[1]).toEqual({
      name: 'vllm:time_to_first_token_seconds_bucket',
      labels: { engine: '0', le: '+Inf', model_name: 'qwen' },
      value: 2,
    });
  });

  it('sums gauges and histograms across series and takes the max of a ratio', () => {
    const { families } = parsePrometheusText(vllm);
    expect(sumSamples(families, 'vllm:num_requests_running')).toBe(7);
    expect(sumSamples(families, 'vllm:prompt_tokens')).toBe(120);
    expect(maxSample(families, 'vllm:kv_cache_usage_perc')).toBe(0.5);
    expect(histogramTotals(families, 'vllm:time_to_first_token_seconds')).toEqual({ sum: 0.75, count: 5 });
    expect(sumSamples(families, 'vllm:num_requests_waiting')).toBeUndefined();
  });

  it('keeps only the requested families', () => {
    const { families } = parsePrometheusText(vllm, { families: new Set(['vllm:kv_cache_usage_perc']) });
    expect([...families.keys()]).toEqual(['vllm:kv_cache_usage_perc']);
  });

  it('handles escapes, special values, untyped samples, CRLF and skips malformed lines', () => {
    const text = 'm{path="a\\"b\\\\c\\nd"} +Inf\r\nn NaN\nbroken{a="x" 1\nnovalue\n{x="1"} 2\nq{} -Inf 1700000000\n';
    const { families, errors } = parsePrometheusText(text);
    expect(families.get('m')?.samples[0]).toEqual({ name: 'm', labels: { path: 'a"b\\c\nd' }, value: Infinity });
    expect(Number.isNaN(families.get('n')?.samples[0]?.value)).toBe(true);
    expect(families.get('q')?.samples[0]?.value).toBe(-Infinity);
    expect(errors).toBe(3);
  });
});

describe('sample values', () => {
  it('reads numbers, infinities and NaN, and tells junk apart from NaN', () => {
    expect([parseSampleValue('1.5e3'), parseSampleValue('+Inf'), parseSampleValue('Inf'), parseSampleValue('-Inf')]).toEqual([
      1500,
      Infinity,
      Infinity,
      -Infinity,
    ]);
    expect(parseSampleValue('NaN')).toBeNaN();
    expect(parseSampleValue('abc')).toBeUndefined();
    expect(parseSampleValue('1.2.3')).toBeUndefined();
  });
});

describe('parseSampleValueBytes', () => {
  const bytes = (text: string) => Buffer.from(`xx${text}yy`, 'latin1');
  const viaBytes = (text: string) => parseSampleValueBytes(bytes(text), 2, 2 + text.length);

  it('gives the double parseSampleValue gives, for plain decimals and everything else', () => {
    const cases = [
      '0',
      '-0',
      '+5',
      '12',
      '3.',
      '.5',
      '-0.25',
      '0.1',
      '0.3',
      '123456789012345',
      '1234567890123456',
      '0.000000000000000000001',
      '0.0000000000000000000000001',
      '1e3',
      '2E-3',
      '-1.5e+2',
      '+Inf',
      'Inf',
      '-Inf',
      'NaN',
      '1.2.3',
      'abc',
      '-',
      '.',
      '0x10',
      '1_0',
    ];
    for (const text of cases) expect([text, viaBytes(text)]).toEqual([text, parseSampleValue(text)]);
  });

  it('matches Number() on random decimals of every length and scale', () => {
    let seed = 7;
    const next = () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0);
    for (let n = 0; n < 20_000; n++) {
      const intDigits = String(next()).slice(0, next() % 10);
      const fracDigits = String(next())
        .padStart(10, '0')
        .slice(0, next() % 12);
      const text = `${next() % 3 === 0 ? '-' : ''}${intDigits}${next() % 4 === 0 && intDigits ? '' : '.'}${fracDigits}`;
      expect([text, viaBytes(text)]).toEqual([text, parseSampleValue(text)]);
    }
  });
});
