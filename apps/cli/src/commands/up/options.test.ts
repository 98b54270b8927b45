import { join } from 'node:path';
import { parseUpOptions, resolveConfigPath } from './options';

const root = join(__dirname, '../../../../..');

describe('parseUpOptions', () => {
  it('defaults to the demo config, port 8080 and automatic NATS', () => {
    const o = parseUpOptions([], {}, '/nowhere', root);
    expect(o).toMatchObject({
      configPath: join(root, 'infra/local/cluster.yaml'),
      port: 8080,
      nats: { kind: 'auto' },
      simLatency: 'realistic',
      rawLogs: false,
      readyTimeoutMs: 90_000,
      stopTimeoutMs: 10_000,
    });
  });

  it('reads flags, resolves --config against the working directory, and takes TRIAD_NATS_URL and TRIAD_PORT', () => {
    const o = parseUpOptions(
      ['--config', 'my.yaml', '--nats', 'spawn', '--sim-latency', 'zero', '--ready-timeout', '5'],
      { TRIAD_PORT: '9000' },
      '/work',
      root,
    );
    expect(o).toMatchObject({ configPath: '/work/my.yaml', port: 9000, nats: { kind: 'spawn' }, simLatency: 'zero', readyTimeoutMs: 5000 });
    expect(parseUpOptions(['--port', '8081'], { TRIAD_NATS_URL: 'nats://n:4222' }, '/', root)).toMatchObject({
      port: 8081,
      nats: { kind: 'url', url: 'nats://n:4222' },
    });
    expect(parseUpOptions(['--nats', 'auto'], {}, '/', root).nats).toEqual({ kind: 'auto' });
  });

  it('finds the default config in the working directory first', () => {
    expect(resolveConfigPath(undefined, root, '/elsewhere')).toBe(join(root, 'infra/local/cluster.yaml'));
    expect(resolveConfigPath('/abs.yaml', '/cwd', root)).toBe('/abs.yaml');
  });
});
