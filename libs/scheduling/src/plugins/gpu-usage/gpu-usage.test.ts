import { buildIndex, endpointsOf, pluginContext } from '../../testing';
import { GpuUsageScorer } from './gpu-usage';

describe('gpu-usage', () => {
  it.each([
    { kv: 0, expected: 100 },
    { kv: 0.25, expected: 75 },
    { kv: 0.3, expected: 70 },
    { kv: 0.7, expected: 30 },
    { kv: 0.999, expected: 0 },
    { kv: 1, expected: 0 },
  ])('kv usage $kv scores $expected (trunc((1 − usage)·100))', ({ kv, expected }) => {
    const index = buildIndex([{ pod: 'a', kv }]);
    const candidates = endpointsOf(index, ['a']);
    const out = new Float64Array(1);
    new GpuUsageScorer('gpu-usage').score(pluginContext({ index, candidates }), candidates, out);
    expect(out[0]).toBe(expected);
  });
});
