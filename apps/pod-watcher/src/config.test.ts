import { resolveConfig } from './config';

describe('pod-watcher settings', () => {
  it('takes flags over TRIAD_* environment variables over defaults', () => {
    const c = resolveConfig(
      { scrapeIntervalMs: '250', namespaces: ['a', 'b'] },
      { TRIAD_SOURCE: 'file:/etc/triad/cluster.yaml', TRIAD_SCRAPE_INTERVAL_MS: '5000', TRIAD_NAMESPACES: 'x,y', POD_NAME: 'pw-0' },
    );
    expect(c).toMatchObject({
      source: { kind: 'file', path: '/etc/triad/cluster.yaml' }, scrapeIntervalMs: 250, namespaces: ['a', 'b'], metricsPort: 9092,
      nats: 'nats://127.0.0.1:4222', scrapeConcurrency: 64,
    });
    expect(resolveConfig({}, { TRIAD_NAMESPACES: 'x, y' }).namespaces).toEqual(['x', 'y']);
    expect(resolveConfig({}, {}).source).toEqual({ kind: 'kube' });
  });

  it('names every bad setting', () => {
    expect(() => resolveConfig(
      { source: 'k8s', scrapeConcurrency: '0' }, {},
    )).toThrow(/source: must be 'kube' or 'file:PATH'.*scrapeConcurrency/);
  });
});
