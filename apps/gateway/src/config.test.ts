import { resolveConfig } from './config';

describe('resolveConfig', () => {
  it('uses flags over TRIAD_* env over defaults', () => {
    const c = resolveConfig({ port: '9000' }, { TRIAD_PORT: '7000', TRIAD_METRICS_PORT: '0', TRIAD_NATS_URL: 'nats://n:4222', TRIAD_ACCESS_LOG: 'false' });
    expect(c).toMatchObject({ port: 9000, metricsPort: 0, nats: 'nats://n:4222', accessLog: false, bodyLimit: 10 * 1024 * 1024, scheduleBudgetMs: 50 });
  });
  it('names the bad field', () => {
    expect(() => resolveConfig({ port: 'eighty' }, {})).toThrow(/port/);
  });
  it('schedules through the service by default; TRIAD_SCHEDULING=in-process decides in the gateway; anything else is refused', () => {
    expect(resolveConfig({}, {}).scheduling).toBe('service');
    expect(resolveConfig({}, { TRIAD_SCHEDULING: 'in-process' }).scheduling).toBe('in-process');
    expect(() => resolveConfig({ scheduling: 'nearby' }, {})).toThrow(/scheduling/);
  });
});
