import { classifyPod, matchesLabels, type PodClassification } from './roles';
import type { ModelServerSpec } from './model-server';

const pdGroup = {
  groupKey: 'group',
  encodeLabels: { role: 'encode' },
  prefillLabels: { role: 'prefill' },
  decodeLabels: { role: 'decode' },
};
const base = { matchLabels: { app: 'm' } };
const aggregated = { workloadSelector: base } as Pick<ModelServerSpec, 'pipelineMode' | 'workloadSelector'>;
const pd = {
  workloadSelector: {
    ...base,
    pdGroup: { ...pdGroup, encodeLabels: undefined },
  },
} as Pick<ModelServerSpec, 'pipelineMode' | 'workloadSelector'>;
const epd = { pipelineMode: 'epd', workloadSelector: { ...base, pdGroup } } as Pick<ModelServerSpec, 'pipelineMode' | 'workloadSelector'>;
const ePd = {
  pipelineMode: 'vllm-epd',
  workloadSelector: { ...base, pdGroup: { groupKey: 'group', encodeLabels: { role: 'encode' }, decodeLabels: { role: 'decode' } } },
} as Pick<ModelServerSpec, 'pipelineMode' | 'workloadSelector'>;
// Overlapping label sets (validation rejects these ModelServers; classification still follows precedence).
const overlapping = {
  pipelineMode: 'epd',
  workloadSelector: {
    ...base,
    pdGroup: { groupKey: 'group', encodeLabels: { enc: 'y' }, prefillLabels: { pre: 'y' }, decodeLabels: { dec: 'y' } },
  },
} as Pick<ModelServerSpec, 'pipelineMode' | 'workloadSelector'>;

describe('classifyPod', () => {
  const cases: { name: string; spec: typeof aggregated; labels: Record<string, string> | undefined; expected: PodClassification }[] = [
    { name: 'aggregated pod', spec: aggregated, labels: { app: 'm' }, expected: { role: 'aggregated' } },
    {
      name: 'aggregated ignores role labels',
      spec: aggregated,
      labels: { app: 'm', role: 'decode', group: 'g' },
      expected: { role: 'aggregated' },
    },
    {
      name: 'selector mismatch',
      spec: aggregated,
      labels: { app: 'x' },
      expected: { role: 'none', reason: 'labels do not match workloadSelector.matchLabels' },
    },
    {
      name: 'no labels',
      spec: aggregated,
      labels: undefined,
      expected: { role: 'none', reason: 'labels do not match workloadSelector.matchLabels' },
    },
    { name: 'pd decode', spec: pd, labels: { app: 'm', role: 'decode', group: 'g1' }, expected: { role: 'decode', group: 'g1' } },
    { name: 'pd prefill', spec: pd, labels: { app: 'm', role: 'prefill', group: 'g2' }, expected: { role: 'prefill', group: 'g2' } },
    {
      name: 'pd ignores encode labels',
      spec: pd,
      labels: { app: 'm', role: 'encode', group: 'g1' },
      expected: { role: 'none', reason: 'labels match no role of pdGroup' },
    },
    {
      name: 'pd pod without group',
      spec: pd,
      labels: { app: 'm', role: 'decode' },
      expected: { role: 'none', reason: "decode pod lacks the group label 'group'" },
    },
    {
      name: 'pd pod with empty group',
      spec: pd,
      labels: { app: 'm', role: 'prefill', group: '' },
      expected: { role: 'none', reason: "prefill pod lacks the group label 'group'" },
    },
    {
      name: 'epd encode with group',
      spec: epd,
      labels: { app: 'm', role: 'encode', group: 'g1' },
      expected: { role: 'encode', group: 'g1' },
    },
    { name: 'epd encode without group serves all groups', spec: epd, labels: { app: 'm', role: 'encode' }, expected: { role: 'encode' } },
    { name: 'epd decode', spec: epd, labels: { app: 'm', role: 'decode', group: 'g1' }, expected: { role: 'decode', group: 'g1' } },
    {
      name: 'E→PD prefill labels absent',
      spec: ePd,
      labels: { app: 'm', role: 'prefill', group: 'g1' },
      expected: { role: 'none', reason: 'labels match no role of pdGroup' },
    },
    { name: 'E→PD decode', spec: ePd, labels: { app: 'm', role: 'decode', group: 'g1' }, expected: { role: 'decode', group: 'g1' } },
    {
      name: 'ambiguous: decode wins',
      spec: overlapping,
      labels: { app: 'm', enc: 'y', dec: 'y', group: 'g' },
      expected: { role: 'decode', group: 'g', ambiguousRoles: ['decode', 'encode'] },
    },
    {
      name: 'ambiguous: prefill before encode',
      spec: overlapping,
      labels: { app: 'm', enc: 'y', pre: 'y', group: 'g' },
      expected: { role: 'prefill', group: 'g', ambiguousRoles: ['prefill', 'encode'] },
    },
  ];
  it.each(cases)('$name', ({ spec, labels, expected }) => {
    expect(classifyPod(spec, labels)).toEqual(expected);
  });
});

describe('matchesLabels', () => {
  it('treats an empty or missing selector as matching nothing', () => {
    expect(matchesLabels({ a: '1' }, {})).toBe(false);
    expect(matchesLabels({ a: '1' }, undefined)).toBe(false);
  });
  it('needs every selector label with the same value', () => {
    expect(matchesLabels({ a: '1', b: '2' }, { a: '1' })).toBe(true);
    expect(matchesLabels({ a: '1' }, { a: '1', b: '2' })).toBe(false);
    expect(matchesLabels({ a: '2' }, { a: '1' })).toBe(false);
  });
});
