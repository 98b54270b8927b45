import { parseOptions } from '../src/options';

describe('triad scheduler flags', () => {
  it('reads flags, falling back to env, then defaults', () => {
    expect(parseOptions([], {})).toMatchObject({ natsUrl: 'nats://127.0.0.1:4222', metricsPort: 9091 });
    expect(
      parseOptions([], {
        TRIAD_NATS_URL: 'nats://n:4222',
        TRIAD_SCHEDULER_CONFIG: '/etc/s.yaml',
        TRIAD_METRICS_PORT: '0',
        TRIAD_INSTANCE_ID: 'sched-0',
      }),
    ).toEqual({
      natsUrl: 'nats://n:4222',
      kvReplicas: 1,
      configFile: '/etc/s.yaml',
      metricsPort: 0,
      instanceId: 'sched-0',
      shutdownGraceMs: 10_000,
      tracePhases: false,
    });
    expect(parseOptions(['--nats', 'nats://a:1,nats://b:2', '--kv-replicas', '3'], {})).toMatchObject({
      natsUrl: 'nats://a:1,nats://b:2',
      kvReplicas: 3,
    });
    expect(
      parseOptions(['--nats', 'nats://flag:1', '--config', 'c.yaml', '--metrics-port', '9999'], { TRIAD_NATS_URL: 'nats://env:2' }),
    ).toMatchObject({ natsUrl: 'nats://flag:1', configFile: 'c.yaml', metricsPort: 9999 });
  });

  it('TRIAD_TRACE_SCHEDULER_PHASES=true turns the phase spans on; another value is refused', () => {
    expect(parseOptions([], { TRIAD_TRACE_SCHEDULER_PHASES: 'true' }).tracePhases).toBe(true);
    expect(parseOptions([], { TRIAD_TRACE_SCHEDULER_PHASES: 'false' }).tracePhases).toBe(false);
    expect(() => parseOptions([], { TRIAD_TRACE_SCHEDULER_PHASES: 'no' })).toThrow(/TRIAD_TRACE_SCHEDULER_PHASES/);
  });

  it('rejects a bad port', () => {
    expect(() => parseOptions(['--metrics-port', 'http'], {})).toThrow(/not a port/);
  });
});
