import { createInTreeRegistry } from '../in-tree';
import { loadSchedulerConfig } from '../../config/load-config';
import { applyScorer, buildIndex, candidatesOf, pluginContext, type EndpointSpec } from '../../testing';
import { LeastLatencyScorer } from './least-latency';

const pods: EndpointSpec[] = [
  { pod: 'a', ttftMs: 100, tpotMs: 10 },
  { pod: 'b', ttftMs: 200, tpotMs: 30 },
  { pod: 'c', ttftMs: 300, tpotMs: 20 },
  { pod: 'new', },
  { pod: 'zero', ttftMs: 0, tpotMs: 15 },
];

function scores(alpha: number, specs: EndpointSpec[] = pods): number[] {
  const c = candidatesOf(buildIndex(specs), specs.map((p) => p.pod));
  return applyScorer(new LeastLatencyScorer('least-latency', { TTFTTPOTWeightFactor: alpha }), pluginContext(), c);
}

describe('least-latency', () => {
  // sTTFT over {100,200,300} = 100, 50, 0; sTPOT over {10,30,20} = 100, 0, 50; no data → 50.
  it.each([
    { alpha: 0.5, expected: [100, 25, 25, 50, 50] },
    { alpha: 1, expected: [100, 50, 0, 50, 50] },
    { alpha: 0, expected: [100, 0, 50, 50, 50] },
    { alpha: 0.25, expected: [100, 12.5, 37.5, 50, 50] },
  ])('α=$alpha', ({ alpha, expected }) => {
    scores(alpha).forEach((v, i) => expect(v).toBeCloseTo(expected[i] as number, 9));
  });

  it('gives 100 when every measured endpoint has the same latency (max = min)', () => {
    expect(scores(0.5, [{ pod: 'a', ttftMs: 80, tpotMs: 8 }, { pod: 'b', ttftMs: 80, tpotMs: 8 }, { pod: 'c' }])).toEqual([100, 100, 50]);
  });

  it.each([
    { value: '.nan', why: 'NaN' },
    { value: '.inf', why: 'Infinity' },
    { value: '-.inf', why: '-Infinity' },
    { value: '1.5', why: 'above 1' },
    { value: '-0.1', why: 'below 0' },
    { value: '"0.5"', why: 'a string' },
  ])('refuses TTFTTPOTWeightFactor $why at load', ({ value }) => {
    const yaml = `plugins:\n  - type: least-latency\n    args: {TTFTTPOTWeightFactor: ${value}}\n`;
    const result = loadSchedulerConfig(yaml, { registry: createInTreeRegistry() });
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.reasons.join('\n')).toMatch(/plugins\[0\]\.args\.TTFTTPOTWeightFactor/);
  });
});
