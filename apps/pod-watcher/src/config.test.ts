import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { resolveConfig } from './config';

describe('pod-watcher settings', () => {
  it('takes flags over TRIAD_* environment variables over defaults', () => {
    const c = resolveConfig(
      { scrapeIntervalMs: '250', namespaces: ['a', 'b'] },
      { TRIAD_SOURCE: 'file:/etc/triad/cluster.yaml', TRIAD_SCRAPE_INTERVAL_MS: '5000', TRIAD_NAMESPACES: 'x,y', POD_NAME: 'pw-0' },
    );
    expect(c).toMatchObject({
      source: { kind: 'file', path: '/etc/triad/cluster.yaml' },
      scrapeIntervalMs: 250,
      namespaces: ['a', 'b'],
      metricsPort: 9092,
      nats: 'nats://127.0.0.1:4222',
      scrapeConcurrency: 64,
    });
    expect(resolveConfig({}, { TRIAD_NAMESPACES: 'x, y' }).namespaces).toEqual(['x', 'y']);
    expect(resolveConfig({}, {}).source).toEqual({ kind: 'kube' });
  });

  it('names every bad setting', () => {
    expect(() => resolveConfig({ source: 'k8s', scrapeConcurrency: '0' }, {})).toThrow(
      "--source: must be 'kube' or 'file:PATH', got 'k8s'; --scrape-concurrency: expected a whole number from 1 to 1024, got '0'",
    );
  });

  it('reads the Gateway API settings from flags, TRIAD_* variables or a settings file; the default Gateway follows POD_NAMESPACE', () => {
    expect(resolveConfig({}, {})).toMatchObject({
      gatewayApi: false,
      gatewayClasses: ['kthena-router', 'triad'],
      defaultGateway: { namespace: 'default', name: 'default', port: 8080 },
    });
    expect(resolveConfig({}, { POD_NAMESPACE: 'kthena-system' }).defaultGateway).toEqual({
      namespace: 'kthena-system',
      name: 'default',
      port: 8080,
    });
    const env = { TRIAD_GATEWAY_API: 'true', TRIAD_GATEWAY_CLASSES: 'a, b', TRIAD_DEFAULT_GATEWAY: 'none', POD_NAMESPACE: 'ns' };
    expect(resolveConfig({}, env)).toMatchObject({ gatewayApi: true, gatewayClasses: ['a', 'b'], defaultGateway: undefined });
    const dir = mkdtempSync(join(tmpdir(), 'triad-pw-settings-'));
    try {
      const file = join(dir, 'settings.yaml');
      writeFileSync(file, 'gateway-api: true\ngateway-class: [gold]\ndefault-gateway: gw/edge:9000\ncredentials-key-file: /keys/k\n');
      expect(resolveConfig({ gatewayClasses: ['flag'] }, { POD_NAMESPACE: 'ns' }, file)).toMatchObject({
        gatewayApi: true,
        gatewayClasses: ['flag'],
        defaultGateway: { namespace: 'gw', name: 'edge', port: 9000 },
        credentialsKeyFile: '/keys/k',
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    expect(() => resolveConfig({ defaultGateway: 'edge' }, {})).toThrow(
      "--default-gateway: must be NAMESPACE/NAME:PORT or 'none', got 'edge'",
    );
  });
});
