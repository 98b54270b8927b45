import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import { NatsSettings, resolveSettings, Setting, type SettingSources } from './settings';

const Schema = z.object({
  nats: z.string().min(1).default('nats://127.0.0.1:4222'),
  metricsPort: Setting.port().default(9090),
  budgetMs: Setting.ms(1).default(50),
  namespaces: z.array(z.string()).default([]),
  instance: z.string().default('host-1'),
  verbose: Setting.boolean().default(false),
});
type Settings = z.infer<typeof Schema>;
const SOURCES: SettingSources<Settings> = {
  nats: { name: 'nats', env: 'TRIAD_NATS_URL' },
  metricsPort: { name: 'metrics-port', env: 'TRIAD_METRICS_PORT' },
  budgetMs: { name: 'budget-ms', env: 'TRIAD_BUDGET_MS' },
  namespaces: { name: 'namespace', env: 'TRIAD_NAMESPACES', list: true },
  instance: { name: 'instance-id', env: ['TRIAD_INSTANCE_ID', 'POD_NAME'] },
  verbose: { name: 'verbose' },
};

describe('resolveSettings', () => {
  const dir = mkdtempSync(join(tmpdir(), 'triad-settings-'));
  const file = (name: string, text: string) => {
    const path = join(dir, name);
    writeFileSync(path, text);
    return path;
  };
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('takes each value from its flag, else its environment variable, else the settings file, else the default', () => {
    const settings = file('s.yaml', 'metrics-port: 7000\nbudget-ms: 70\nnats: nats://file:4222\nverbose: true\n');
    const s = resolveSettings('test', Schema, SOURCES, {
      flags: { metricsPort: '9000', namespaces: [] },
      env: { TRIAD_BUDGET_MS: '80', TRIAD_NAMESPACES: 'a, b,', POD_NAME: 'pod-0' },
      file: settings,
    });
    expect(s).toEqual({
      nats: 'nats://file:4222',
      metricsPort: 9000,
      budgetMs: 80,
      namespaces: ['a', 'b'],
      instance: 'pod-0',
      verbose: true,
    });
    expect(resolveSettings('test', Schema, SOURCES, { env: {} })).toEqual({
      nats: 'nats://127.0.0.1:4222',
      metricsPort: 9090,
      budgetMs: 50,
      namespaces: [],
      instance: 'host-1',
      verbose: false,
    });
  });

  it('reads the settings file named by TRIAD_SETTINGS_FILE, and the first of several variables that is set', () => {
    const settings = file('s.json', '{"budget-ms": 99}');
    const s = resolveSettings('test', Schema, SOURCES, {
      env: { TRIAD_SETTINGS_FILE: settings, TRIAD_INSTANCE_ID: 'i-1', POD_NAME: 'pod-0', TRIAD_NATS_URL: '' },
    });
    expect(s).toMatchObject({ budgetMs: 99, instance: 'i-1', nats: 'nats://127.0.0.1:4222' });
  });

  it('names the flag, variable or file each bad value came from, and every bad one at once', () => {
    const settings = file('bad.yaml', 'budget-ms: 0\n');
    let err: unknown;
    try {
      resolveSettings('test', Schema, SOURCES, {
        flags: { metricsPort: 'http' },
        env: { TRIAD_NATS_URL: 'nats://n:1', TRIAD_INSTANCE_ID: 'x' },
        file: settings,
      });
    } catch (e) {
      err = e;
    }
    expect(err).toMatchObject({
      code: 'CONFIG_INVALID',
      problems: ['--metrics-port: not a port (an integer from 0 to 65535)', `budget-ms in ${settings}: must be at least 1ms, got 0`],
    });
    expect(() => resolveSettings('test', Schema, SOURCES, { env: { TRIAD_METRICS_PORT: '70000' } })).toThrow(
      /^invalid test settings: TRIAD_METRICS_PORT: not a port \(an integer from 0 to 65535\)$/,
    );
  });

  it('refuses a settings file with unknown names or that is not a mapping', () => {
    expect(() => resolveSettings('test', Schema, SOURCES, { env: {}, file: file('typo.yaml', 'metrics_port: 1\n') })).toThrow(
      /unknown setting 'metrics_port'/,
    );
    expect(() => resolveSettings('test', Schema, SOURCES, { env: {}, file: file('list.yaml', '- 1\n') })).toThrow(/must be a mapping/);
    expect(() => resolveSettings('test', Schema, SOURCES, { env: {}, file: join(dir, 'missing.yaml') })).toThrow(
      /cannot read settings file/,
    );
  });
});

describe('NatsSettings (shared by every service)', () => {
  const schema = z.object({
    nats: NatsSettings.servers().default(NatsSettings.defaultUrl),
    kvReplicas: NatsSettings.kvReplicas().default(1),
  });
  const resolve = (layers: Parameters<typeof resolveSettings>[3]) => resolveSettings('svc', schema, NatsSettings.sources, layers);

  it('takes every seed URL, comma-separated, from --nats, TRIAD_NATS_URL or NATS_URL, and the KV replicas', () => {
    expect(resolve({ env: {} })).toEqual({ nats: 'nats://127.0.0.1:4222', kvReplicas: 1 });
    expect(resolve({ env: { NATS_URL: 'nats://a:4222, nats://b:4222 ,nats://c:4222', TRIAD_KV_REPLICAS: '3' } })).toEqual({
      nats: 'nats://a:4222,nats://b:4222,nats://c:4222',
      kvReplicas: 3,
    });
    expect(resolve({ env: { NATS_URL: 'nats://x:1', TRIAD_NATS_URL: 'nats://y:2' } }).nats).toBe('nats://y:2');
    expect(resolve({ flags: { nats: 'n1:4222,tls://n2:4443', kvReplicas: '5' }, env: {} })).toEqual({
      nats: 'n1:4222,tls://n2:4443',
      kvReplicas: 5,
    });
  });

  it('names the bad value and where it came from', () => {
    expect(() => resolve({ env: { TRIAD_KV_REPLICAS: '7' } })).toThrow(/TRIAD_KV_REPLICAS: expected a replica count from 1 to 5/);
    expect(() => resolve({ env: { TRIAD_KV_REPLICAS: 'three' } })).toThrow(/TRIAD_KV_REPLICAS: expected a replica count from 1 to 5/);
    expect(() => resolve({ flags: { nats: 'nats://a:4222,http://b c' }, env: {} })).toThrow(/--nats: must be NATS URLs, comma-separated/);
    expect(() => resolve({ env: { NATS_URL: ' , ' } })).toThrow(/NATS_URL: must be NATS URLs/);
  });
});

describe('durations and sizes take units (@triad/units), wherever they come from', () => {
  const schema = z.object({
    budgetMs: Setting.ms(1).default(50),
    bodyLimit: Setting.bytes(1024).default(10 * 1024 * 1024),
    batch: Setting.count(1, 256).default(64),
  });
  const sources: SettingSources<z.infer<typeof schema>> = {
    budgetMs: { name: 'budget-ms', env: 'TRIAD_BUDGET_MS' },
    bodyLimit: { name: 'body-limit', env: 'TRIAD_BODY_LIMIT' },
    batch: { name: 'batch', env: 'TRIAD_BATCH' },
  };
  const resolve = (layers: Parameters<typeof resolveSettings>[3]) => resolveSettings('svc', schema, sources, layers);

  it('reads 2s, 1m30s, 10MiB and 512 KiB from flags and the environment; bare numbers keep their old unit', () => {
    expect(resolve({ flags: { budgetMs: '2s', bodyLimit: '10MiB' }, env: {} })).toEqual({
      budgetMs: 2000,
      bodyLimit: 10_485_760,
      batch: 64,
    });
    expect(resolve({ env: { TRIAD_BUDGET_MS: '1m30s', TRIAD_BODY_LIMIT: '512 KiB' } })).toMatchObject({
      budgetMs: 90_000,
      bodyLimit: 524_288,
    });
    expect(resolve({ env: { TRIAD_BUDGET_MS: '250', TRIAD_BODY_LIMIT: '4096' } })).toMatchObject({ budgetMs: 250, bodyLimit: 4096 });
  });

  it('reads numbers and unit strings from a settings file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'triad-units-'));
    try {
      const file = join(dir, 's.yaml');
      writeFileSync(file, 'budget-ms: 250ms\nbody-limit: 2MB\nbatch: 8\n');
      expect(resolve({ env: {}, file })).toEqual({ budgetMs: 250, bodyLimit: 2_000_000, batch: 8 });
      writeFileSync(file, 'budget-ms: 75\nbody-limit: 2048\n');
      expect(resolve({ env: {}, file })).toMatchObject({ budgetMs: 75, bodyLimit: 2048 });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('says what a value must look like, naming the flag or variable it came from', () => {
    expect(() => resolve({ flags: { bodyLimit: '10XB' }, env: {} })).toThrow(
      "invalid svc settings: --body-limit: expected a size such as 10MiB, 512KiB or 1GB (a bare number is bytes), got '10XB'",
    );
    expect(() => resolve({ env: { TRIAD_BUDGET_MS: 'soon' } })).toThrow(
      "TRIAD_BUDGET_MS: expected a duration such as 500ms, 10s or 1m30s (a bare number is milliseconds), got 'soon'",
    );
    expect(() => resolve({ flags: { bodyLimit: '1KB' }, env: {} })).toThrow("--body-limit: must be at least 1 KiB, got '1KB'");
    expect(() => resolve({ env: { TRIAD_BATCH: '0' } })).toThrow("TRIAD_BATCH: expected a whole number from 1 to 256, got '0'");
  });
});
