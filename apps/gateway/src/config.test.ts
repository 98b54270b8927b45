import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEFAULT_STAGE_TIMEOUTS } from '@triad/request';
import { resolveConfig } from './config';

describe('resolveConfig', () => {
  it('uses flags over TRIAD_* env over defaults', () => {
    const c = resolveConfig(
      { port: '9000' },
      { TRIAD_PORT: '7000', TRIAD_METRICS_PORT: '0', TRIAD_NATS_URL: 'nats://n:4222', TRIAD_ACCESS_LOG: 'false' },
    );
    expect(c).toMatchObject({
      port: 9000,
      metricsPort: 0,
      nats: 'nats://n:4222',
      accessLog: false,
      bodyLimit: 10 * 1024 * 1024,
      scheduleBudgetMs: 50,
    });
  });
  it('names the bad field', () => {
    expect(() => resolveConfig({ port: 'eighty' }, {})).toThrow(/port/);
  });
  it('takes sizes and durations with units: --body-limit 10MiB, TRIAD_DRAIN_TIMEOUT_MS=1m', () => {
    const c = resolveConfig(
      { bodyLimit: '10MiB', scheduleBudgetMs: '20ms' },
      { TRIAD_DRAIN_TIMEOUT_MS: '1m', TRIAD_BODY_DISCARD_LIMIT: '1GiB' },
    );
    expect(c).toMatchObject({ bodyLimit: 10 * 1024 * 1024, scheduleBudgetMs: 20, drainTimeoutMs: 60_000, bodyDiscardLimit: 2 ** 30 });
    expect(() => resolveConfig({ bodyLimit: '10 megs' }, {})).toThrow(
      "--body-limit: expected a size such as 10MiB, 512KiB or 1GB (a bare number is bytes), got '10 megs'",
    );
  });

  it('schedules through the service by default; TRIAD_SCHEDULING=in-process decides in the gateway; anything else is refused', () => {
    expect(resolveConfig({}, {}).scheduling).toBe('service');
    expect(resolveConfig({}, { TRIAD_SCHEDULING: 'in-process' }).scheduling).toBe('in-process');
    expect(() => resolveConfig({ scheduling: 'nearby' }, {})).toThrow(/scheduling/);
  });
  it('packs dispatch events by default; TRIAD_DISPATCH_WIRE=events keeps the object form for older schedulers; anything else is refused', () => {
    expect(resolveConfig({}, {}).dispatchWire).toBe('packed');
    expect(resolveConfig({}, { TRIAD_DISPATCH_WIRE: 'events' }).dispatchWire).toBe('events');
    expect(() => resolveConfig({ dispatchWire: 'compact' }, {})).toThrow(/dispatch-wire/);
  });
  it("reads a settings file under flags and env, naming a bad value's file, and defaults the stage budgets once", () => {
    const dir = mkdtempSync(join(tmpdir(), 'triad-gw-settings-'));
    try {
      const file = join(dir, 'gateway.yaml');
      writeFileSync(file, 'port: 7100\nscheduler-backoff-ms: 250\naccess-log: false\nschedule-budget-ms: 20\n');
      const c = resolveConfig({ port: 7200 }, { TRIAD_SCHEDULE_BUDGET_MS: '30', TRIAD_SETTINGS_FILE: file });
      expect(c).toMatchObject({ port: 7200, scheduleBudgetMs: 30, schedulerBackoffMs: 250, accessLog: false });
      expect(c).toMatchObject({ encodeTimeoutMs: DEFAULT_STAGE_TIMEOUTS.encodeMs, totalTimeoutMs: DEFAULT_STAGE_TIMEOUTS.totalMs });
      writeFileSync(file, 'schedule-max-batch: 0\n');
      expect(() => resolveConfig({}, {}, file)).toThrow(`schedule-max-batch in ${file}: expected a whole number from 1 to 256, got 0`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
