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
      problems: [
        'metricsPort: not a port (an integer from 0 to 65535) (from --metrics-port)',
        expect.stringMatching(new RegExp(`^budgetMs: .*>=1 \\(from budget-ms in ${settings.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\)$`)),
      ],
    });
    expect(() => resolveSettings('test', Schema, SOURCES, { env: { TRIAD_METRICS_PORT: '70000' } })).toThrow(
      /^invalid test settings: metricsPort: not a port .*\(from TRIAD_METRICS_PORT\)$/,
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
    expect(() => resolve({ env: { TRIAD_KV_REPLICAS: '7' } })).toThrow(
      /kvReplicas: expected a replica count from 1 to 5 \(from TRIAD_KV_REPLICAS\)/,
    );
    expect(() => resolve({ env: { TRIAD_KV_REPLICAS: 'three' } })).toThrow(/kvReplicas: expected a replica count from 1 to 5/);
    expect(() => resolve({ flags: { nats: 'nats://a:4222,http://b c' }, env: {} })).toThrow(
      /nats: must be NATS URLs, comma-separated .*\(from --nats\)/,
    );
    expect(() => resolve({ env: { NATS_URL: ' , ' } })).toThrow(/\(from NATS_URL\)/);
  });
});
