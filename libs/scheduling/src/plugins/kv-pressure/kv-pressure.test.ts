import { applyFilter, buildIndex, candidatesOf, pluginContext } from '../../testing';
import { KvPressureFilter } from './kv-pressure';

describe('kv-pressure', () => {
  it.each([
    { kvs: [0.5, 0.9, 0.95, 1], kept: ['p0', 'p1'] },
    { kvs: [0.91, 0.99], kept: [] },
    { kvs: [0, 0.2], kept: ['p0', 'p1'] },
  ])('threshold 0.9 over $kvs keeps $kept', ({ kvs, kept }) => {
    const c = candidatesOf(
      buildIndex(kvs.map((kv, i) => ({ pod: `p${i}`, kv }))),
      kvs.map((_, i) => `p${i}`),
    );
    expect(applyFilter(new KvPressureFilter('kv-pressure', { threshold: 0.9 }), pluginContext(), c)).toEqual(kept);
  });
});
