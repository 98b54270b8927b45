import { buildIndex, endpointsOf, pluginContext, schedulingRequest } from '../../testing';
import { LoraAffinityFilter } from './lora-affinity';

describe('lora-affinity', () => {
  it('keeps endpoints serving the upstream model, and those that have not reported models yet', () => {
    const index = buildIndex([
      { pod: 'base', models: ['m'] },
      { pod: 'with-adapter', models: ['m', 'sql-lora'] },
      { pod: 'unknown', models: [] },
      { pod: 'other', models: ['x'] },
    ]);
    const candidates = endpointsOf(index, ['base', 'with-adapter', 'unknown', 'other']);
    const ctx = pluginContext({ index, request: schedulingRequest({ model: 'sql-lora' }) });
    expect(new LoraAffinityFilter('lora-affinity').filter(ctx, candidates).map((e) => e.record.pod)).toEqual(['with-adapter', 'unknown']);
  });
});
