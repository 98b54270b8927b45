import { applyFilter, buildIndex, candidatesOf, pluginContext, schedulingRequest } from '../../testing';
import { LoraAffinityFilter } from './lora-affinity';

describe('lora-affinity', () => {
  it('keeps endpoints serving the upstream model, and those that have not reported models yet', () => {
    const index = buildIndex([
      { pod: 'base', models: ['m'] },
      { pod: 'with-adapter', models: ['m', 'sql-lora'] },
      { pod: 'unknown', models: [] },
      { pod: 'other', models: ['x'] },
    ]);
    const c = candidatesOf(index, ['base', 'with-adapter', 'unknown', 'other']);
    const ctx = pluginContext({ request: schedulingRequest({ model: 'sql-lora' }) });
    expect(applyFilter(new LoraAffinityFilter('lora-affinity'), ctx, c)).toEqual(['with-adapter', 'unknown']);
  });
});
