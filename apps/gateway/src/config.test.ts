import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEFAULT_STAGE_TIMEOUTS } from '@triad/request';
import { DEFAULT_MAX_CONNECTIONS_PER_CLIENT, resolveConfig } from './config';
import { main } from './cli';

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

  it('caps client connections per address and times client requests by default; takes them from the environment', () => {
    expect(resolveConfig({}, {})).toMatchObject({
      maxConnectionsPerClient: DEFAULT_MAX_CONNECTIONS_PER_CLIENT,
      headersTimeoutMs: 10_000,
      requestReceiveTimeoutMs: 300_000,
      keepAliveTimeoutMs: 75_000,
    });
    const c = resolveConfig(
      {},
      {
        TRIAD_MAX_CONNECTIONS_PER_CLIENT: '0',
        TRIAD_HEADERS_TIMEOUT_MS: '5s',
        TRIAD_REQUEST_RECEIVE_TIMEOUT_MS: '1m',
        TRIAD_KEEP_ALIVE_TIMEOUT_MS: '90s',
      },
    );
    expect(c).toMatchObject({
      maxConnectionsPerClient: 0,
      headersTimeoutMs: 5_000,
      requestReceiveTimeoutMs: 60_000,
      keepAliveTimeoutMs: 90_000,
    });
  });
  it('refuses bad client connection settings, naming each', () => {
    expect(() => resolveConfig({}, { TRIAD_MAX_CONNECTIONS_PER_CLIENT: '-1' })).toThrow(
      "TRIAD_MAX_CONNECTIONS_PER_CLIENT: expected a whole number from 0 to 1000000, got '-1'",
    );
    expect(() => resolveConfig({ maxConnectionsPerClient: 'lots' }, {})).toThrow('--max-connections-per-client: expected a whole number');
    expect(() => resolveConfig({ headersTimeoutMs: '0' }, {})).toThrow("--headers-timeout-ms: must be at least 1ms, got '0'");
    expect(() => resolveConfig({}, { TRIAD_KEEP_ALIVE_TIMEOUT_MS: 'soon' })).toThrow('TRIAD_KEEP_ALIVE_TIMEOUT_MS: expected a duration');
    // node refuses a header timeout over the request timeout: refused here first, with both named.
    expect(() => resolveConfig({}, { TRIAD_HEADERS_TIMEOUT_MS: '30s', TRIAD_REQUEST_RECEIVE_TIMEOUT_MS: '20s' })).toThrow(
      'TRIAD_HEADERS_TIMEOUT_MS: 30000 ms is longer than request-receive-timeout-ms (20000 ms), which times the whole request, head included',
    );
  });
  it('refuses a bad client connection setting at startup (`triad gateway --settings`), before it connects anywhere', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'triad-gw-settings-'));
    try {
      const file = join(dir, 'gateway.yaml');
      writeFileSync(file, 'max-connections-per-client: many\nheaders-timeout-ms: 10s\n');
      await expect(main(['--settings', file, '--nats', 'nats://127.0.0.1:1'])).rejects.toThrow(
        `invalid gateway settings: max-connections-per-client in ${file}: expected a whole number from 0 to 1000000, got 'many'`,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
