import { applyScorer, buildIndex, candidatesOf, pluginContext } from '../../testing';
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
    const c = candidatesOf(buildIndex([{ pod: 'a', kv }]), ['a']);
    expect(applyScorer(new GpuUsageScorer('gpu-usage'), pluginContext(), c)).toEqual([expected]);
  });
});
