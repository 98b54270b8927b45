import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseOptions } from '../src/options';

const dir = mkdtempSync(join(tmpdir(), 'triad-scheduler-options-'));
const configFile = join(dir, 's.yaml');
writeFileSync(configFile, 'profiles: {}\n');
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('triad scheduler flags', () => {
  it('reads flags, falling back to env, then defaults', () => {
    expect(parseOptions([], {})).toMatchObject({ natsUrl: 'nats://127.0.0.1:4222', metricsPort: 9091 });
    expect(
      parseOptions([], {
        TRIAD_NATS_URL: 'nats://n:4222',
        TRIAD_SCHEDULER_CONFIG: configFile,
        TRIAD_METRICS_PORT: '0',
        TRIAD_INSTANCE_ID: 'sched-0',
      }),
    ).toEqual({
      natsUrl: 'nats://n:4222',
      kvReplicas: 1,
      configFile,
      metricsPort: 0,
      metricsHost: '0.0.0.0',
      instanceId: 'sched-0',
      shutdownGraceMs: 10_000,
      tracePhases: false,
      pickQualityEvery: 16,
      affinityFlushMs: 10,
    });
    expect(parseOptions(['--nats', 'nats://a:1,nats://b:2', '--kv-replicas', '3'], {})).toMatchObject({
      natsUrl: 'nats://a:1,nats://b:2',
      kvReplicas: 3,
    });
    expect(
      parseOptions(['--nats', 'nats://flag:1', '--config', configFile, '--metrics-port', '9999', '--metrics-host', '127.0.0.1'], {
        TRIAD_NATS_URL: 'nats://env:2',
      }),
    ).toMatchObject({ natsUrl: 'nats://flag:1', configFile, metricsPort: 9999, metricsHost: '127.0.0.1' });
  });

  it('TRIAD_TRACE_SCHEDULER_PHASES=true turns the phase spans on; another value is refused', () => {
    expect(parseOptions([], { TRIAD_TRACE_SCHEDULER_PHASES: 'true' }).tracePhases).toBe(true);
    expect(parseOptions([], { TRIAD_TRACE_SCHEDULER_PHASES: 'false' }).tracePhases).toBe(false);
    expect(() => parseOptions([], { TRIAD_TRACE_SCHEDULER_PHASES: 'no' })).toThrow(/TRIAD_TRACE_SCHEDULER_PHASES/);
  });

  it('TRIAD_PICK_QUALITY_EVERY sets how many decisions per judged one (at least 1)', () => {
    expect(parseOptions([], { TRIAD_PICK_QUALITY_EVERY: '1' }).pickQualityEvery).toBe(1);
    expect(() => parseOptions([], { TRIAD_PICK_QUALITY_EVERY: '0' })).toThrow(/TRIAD_PICK_QUALITY_EVERY/);
  });

  it('refuses a config file it cannot read before starting, naming the flag or variable', () => {
    expect(() => parseOptions(['--config', join(dir, 'missing.yaml')], {})).toThrow(
      `invalid scheduler settings: --config: cannot read '${join(dir, 'missing.yaml')}': no such file`,
    );
    expect(() => parseOptions([], { TRIAD_SCHEDULER_CONFIG: dir })).toThrow(
      `TRIAD_SCHEDULER_CONFIG: cannot read '${dir}': it is a directory`,
    );
  });

  it('TRIAD_AFFINITY_FLUSH_MS sets the affinity window as a duration (0: with the reply), at most 1 s', () => {
    expect(parseOptions([], { TRIAD_AFFINITY_FLUSH_MS: '0' }).affinityFlushMs).toBe(0);
    expect(parseOptions([], { TRIAD_AFFINITY_FLUSH_MS: '20ms' }).affinityFlushMs).toBe(20);
    expect(() => parseOptions([], { TRIAD_AFFINITY_FLUSH_MS: '2s' })).toThrow(/TRIAD_AFFINITY_FLUSH_MS/);
  });

  it('takes its shutdown grace as a duration with units', () => {
    expect(parseOptions([], { TRIAD_SHUTDOWN_GRACE_MS: '30s' }).shutdownGraceMs).toBe(30_000);
  });

  it('rejects a bad port', () => {
    expect(() => parseOptions(['--metrics-port', 'http'], {})).toThrow(/not a port/);
  });
});
