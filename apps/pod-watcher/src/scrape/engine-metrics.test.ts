import { readEngineLoad } from './engine-metrics';
import { NO_RANK, forEachSample } from './sample-scan';
import { hasNewObservations, intervalMeanMs } from './histogram-mean';

const vllmTwoRanks = `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m",engine="0"} 3.0
vllm:num_requests_running{model_name="m",engine="1"} 2.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="m",engine="0"} 4.0
vllm:num_requests_waiting{model_name="m",engine="1"} 0.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{model_name="m",engine="0"} 0.6
vllm:kv_cache_usage_perc{model_name="m",engine="1"} 0.2
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{model_name="m",engine="0",le="+Inf"} 2.0
vllm:time_to_first_token_seconds_sum{model_name="m",engine="0"} 0.5
vllm:time_to_first_token_seconds_count{model_name="m",engine="0"} 2.0
vllm:time_to_first_token_seconds_sum{model_name="m",engine="1"} 0.1
vllm:time_to_first_token_seconds_count{model_name="m",engine="1"} 1.0
# TYPE vllm:time_per_output_token_seconds histogram
vllm:time_per_output_token_seconds_sum{model_name="m",engine="0"} 0.3
vllm:time_per_output_token_seconds_count{model_name="m",engine="0"} 10.0
`;

describe('reading engine load from /metrics text', () => {
  it('sums running and waiting over DP ranks, averages KV usage, totals histograms over series', () => {
    const r = readEngineLoad('vLLM', vllmTwoRanks);
    expect(r).toEqual({
      ok: true,
      load: { running: 5, waiting: 4, kvCacheUsage: 0.4, ttft: { sum: 0.6, count: 3 }, tpot: { sum: 0.3, count: 10 } },
    });
  });

  it('reads each page on its own: nothing of the previous page (ranks, totals) carries over', () => {
    const ranked = [
      'sglang:num_running_reqs{dp_rank="0"} 1',
      'sglang:num_running_reqs{dp_rank="1"} 2',
      'sglang:num_queue_reqs{dp_rank="1"} 3',
    ];
    const first = readEngineLoad('SGLang', ranked.join('\n'));
    expect(first.ok && first.load.dpRanks).toEqual([
      { running: 1, waiting: 0 },
      { running: 2, waiting: 3 },
    ]);
    const second = readEngineLoad('SGLang', 'sglang:num_running_reqs 4\nsglang:num_queue_reqs{dp_rank="0"} 1\n');
    expect(second).toEqual({ ok: true, load: { running: 4, waiting: 1, kvCacheUsage: 0, ttft: undefined, tpot: undefined } });
    // The first result is the caller's: reading another page did not change it.
    expect(first.ok && first.load.dpRanks?.[1]).toEqual({ running: 2, waiting: 3 });
  });

  it('reads SGLang names (dp_rank series, is_streaming label sets) and the older KV name of vLLM', () => {
    const sglang = [
      'sglang:num_running_reqs{dp_rank="0",tp_rank="0"} 1',
      'sglang:num_running_reqs{dp_rank="1",tp_rank="0"} 2',
      'sglang:num_queue_reqs{dp_rank="0"} 7',
      'sglang:token_usage{dp_rank="0"} 0.5',
      'sglang:token_usage{dp_rank="1"} 0.7',
      '# TYPE sglang:time_to_first_token_seconds histogram',
      'sglang:time_to_first_token_seconds_sum{is_streaming="true"} 1',
      'sglang:time_to_first_token_seconds_count{is_streaming="true"} 2',
      'sglang:time_to_first_token_seconds_sum{is_streaming="false"} 2',
      'sglang:time_to_first_token_seconds_count{is_streaming="false"} 2',
    ].join('\n');
    const r = readEngineLoad('SGLang', sglang);
    expect(r.ok && r.load).toMatchObject({ running: 3, waiting: 7, ttft: { sum: 3, count: 4 } });
    expect(r.ok && r.load.kvCacheUsage).toBeCloseTo(0.6);
    // Per rank too, for the gateway's DP-rank hints.
    expect(r.ok && r.load.dpRanks).toEqual([
      { running: 1, waiting: 7 },
      { running: 2, waiting: 0 },
    ]);
    const old = readEngineLoad('vLLM', 'vllm:gpu_cache_usage_perc{model_name="m"} 0.25\nvllm:num_requests_running 1\n');
    expect(old.ok && old.load).toMatchObject({ kvCacheUsage: 0.25, running: 1, waiting: 0, ttft: undefined });
  });

  it('skips malformed lines, and calls a response without the engine gauges an error', () => {
    const r = readEngineLoad('vLLM', 'garbage line {\nvllm:num_requests_running{model_name="m" 3\nvllm:num_requests_waiting 2\n');
    expect(r).toMatchObject({ ok: true, load: { running: 0, waiting: 2 } });
    expect(readEngineLoad('vLLM', '<html>502 Bad Gateway</html>')).toMatchObject({
      ok: false,
      error: expect.stringContaining('vllm:num_requests_running'),
    });
    expect(readEngineLoad('SGLang', vllmTwoRanks)).toMatchObject({ ok: false, error: expect.stringContaining('inferenceEngine SGLang') });
  });

  it('clamps KV usage into 0..1 and ignores NaN series', () => {
    const r = readEngineLoad(
      'vLLM',
      'vllm:kv_cache_usage_perc{engine="0"} 1.2\nvllm:kv_cache_usage_perc{engine="1"} NaN\nvllm:num_requests_running NaN\n',
    );
    expect(r.ok && r.load).toMatchObject({ kvCacheUsage: 1, running: 0 });
  });
});

describe('interval mean from histogram deltas', () => {
  it('is Δsum/Δcount in ms; keeps the previous mean on the first scrape and on idle intervals', () => {
    expect(intervalMeanMs(undefined, { sum: 1, count: 4 }, undefined)).toBeUndefined();
    expect(intervalMeanMs({ sum: 1, count: 4 }, { sum: 1.6, count: 6 }, undefined)).toBeCloseTo(300);
    expect(intervalMeanMs({ sum: 1.6, count: 6 }, { sum: 1.6, count: 6 }, 300)).toBe(300);
    expect(intervalMeanMs({ sum: 1.6, count: 6 }, undefined, 300)).toBe(300);
  });

  it('uses the new totals after an engine restart (counters went down)', () => {
    expect(intervalMeanMs({ sum: 10, count: 100 }, { sum: 0.2, count: 2 }, 50)).toBeCloseTo(100);
    expect(intervalMeanMs({ sum: 10, count: 100 }, { sum: 0, count: 0 }, 50)).toBe(50);
  });

  it('tells an interval with new observations from an idle one, so the means can age out', () => {
    expect(hasNewObservations(undefined, { sum: 1, count: 4 })).toBe(false);
    expect(hasNewObservations({ sum: 1, count: 4 }, { sum: 1, count: 4 })).toBe(false);
    expect(hasNewObservations({ sum: 1, count: 4 }, { sum: 1.5, count: 5 })).toBe(true);
    expect(hasNewObservations({ sum: 10, count: 100 }, { sum: 0.2, count: 2 })).toBe(true);
    expect(hasNewObservations({ sum: 10, count: 100 }, { sum: 0, count: 0 })).toBe(false);
  });
});

describe('sample scan', () => {
  const values = (page: string, name: string) => {
    const seen: [number, number][] = [];
    forEachSample(Buffer.from(page, 'utf8'), name, { add: (v, rank) => seen.push([v, rank]) });
    return seen;
  };

  it('reads only lines of the exact name: not buckets, look-alikes, HELP or TYPE lines', () => {
    const page = [
      'vllm:num_requests_running 5',
      'vllm:num_requests_running{engine="0"} 1',
      '# HELP vllm:num_requests_running x',
      '# TYPE vllm:num_requests_running gauge',
      'vllm:num_requests_running_extra 9',
      'vllm:ttft_bucket{le="1"} 1',
      'vllm:ttft_sum 2',
      'xvllm:num_requests_running 7',
    ].join('\n');
    expect(values(page, 'vllm:num_requests_running')).toEqual([
      [5, NO_RANK],
      [1, NO_RANK],
    ]);
    expect(values(page, 'vllm:ttft_sum')).toEqual([[2, NO_RANK]]);
    expect(values(page, 'vllm:ttft')).toEqual([]);
  });

  it('looks for more samples of a name only within its family block (the format keeps a family together)', () => {
    const page = ['# TYPE a gauge', 'a{x="1"} 1', 'a_extra 0', 'a{x="2"} 2', '# TYPE b gauge', 'b 3', 'a{x="3"} 4'].join('\n');
    expect(values(page, 'a')).toEqual([
      [1, NO_RANK],
      [2, NO_RANK],
    ]);
  });

  it('reads dp_rank among other labels, escaped quotes, timestamps, CRLF and a label set without a space after it', () => {
    const page = [
      'sglang:num_running_reqs{model="a \\"b\\" c",dp_rank="3",tp_rank="0"} 4 1700000000000\r',
      'sglang:num_running_reqs{ dp_rank="12345", } 1',
      'sglang:num_running_reqs{dp_rank="x1"}2',
      'sglang:num_running_reqs{dp_rank="0"} +Inf',
    ].join('\n');
    expect(values(page, 'sglang:num_running_reqs')).toEqual([
      [4, 3],
      [1, NO_RANK],
      [2, NO_RANK],
      [Infinity, 0],
    ]);
  });

  it('skips malformed lines: unterminated label sets, missing or junk values', () => {
    const page = ['m{a="1" 3', 'm{a="1', 'm ', 'm abc', 'm NaN', 'm{a="1"} 2'].join('\n');
    const seen = values(page, 'm');
    expect(seen).toHaveLength(2);
    expect(seen[0]?.[0]).toBeNaN();
    expect(seen[1]).toEqual([2, NO_RANK]);
  });

  it('reads the answer bytes: label values may be any UTF-8 text', () => {
    const page = Buffer.from(
      ['# TYPE vllm:num_requests_running gauge', 'vllm:num_requests_running{model_name="modèle-数",dp_rank="1"} 4', 'vllm:other 1'].join(
        '\n',
      ),
      'utf8',
    );
    const r = readEngineLoad('vLLM', page);
    expect(r.ok && r.load).toMatchObject({
      running: 4,
      dpRanks: [
        { running: 0, waiting: 0 },
        { running: 4, waiting: 0 },
      ],
    });
  });
});
