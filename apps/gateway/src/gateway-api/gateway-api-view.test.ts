import type { HttpRouteRecord } from '@triad/bus';
import { GatewayApiView, normalizeHost } from './gateway-api-view';

const L = { namespace: 'ns', gateway: 'gw', listener: 'l', port: 8080 };
const parents = [{ namespace: 'ns', gateway: 'gw', listener: 'l', port: 8080 }];
const backend = (name: string) => [{ namespace: 'ns', name, weight: 1, modelServer: `inferencepool=${name}`, port: 8000 }];

function view(routes: (Partial<HttpRouteRecord> & { name: string })[]): GatewayApiView {
  const v = new GatewayApiView(
    () => undefined,
    () => 0,
  );
  for (const r of routes) {
    v.applyHttpRoute({
      key: `ns.${r.name}`,
      op: 'PUT',
      revision: 1,
      value: { schemaVersion: 1, namespace: 'ns', hostnames: [], parents, rules: [], ...r },
    });
  }
  return v;
}

describe('GatewayApiView', () => {
  it('orders matches as Gateway API does: Exact, then the longest PathPrefix, then RegularExpression', () => {
    const v = view([
      {
        name: 'r',
        rules: [
          { index: 0, matches: [{ type: 'RegularExpression', value: '/v1/.*' }], backends: backend('regex') },
          { index: 1, matches: [{ type: 'PathPrefix', value: '/v1' }], backends: backend('short') },
          { index: 2, matches: [{ type: 'PathPrefix', value: '/v1/chat/' }], backends: backend('long') },
          { index: 3, matches: [{ type: 'Exact', value: '/v1/chat/completions' }], backends: backend('exact') },
        ],
      },
    ]);
    expect(v.match(L, 'h', '/v1/chat/completions')?.backend?.pool).toBe('exact');
    expect(v.match(L, 'h', '/v1/chat/other')?.backend?.pool).toBe('long');
    expect(v.match(L, 'h', '/v1/models')?.backend?.pool).toBe('short');
    // Whole segments only: `/v1` does not match `/v10`.
    expect(v.match(L, 'h', '/v10')).toBeUndefined();
  });

  it('prefers an exact route hostname over a wildcard over none, then the older route', () => {
    const rule = (name: string) => [{ index: 0, matches: [{ type: 'PathPrefix' as const, value: '/' }], backends: backend(name) }];
    const v = view([
      { name: 'any', rules: rule('any'), creationTimestamp: '2026-01-01T00:00:00Z' },
      { name: 'wild', hostnames: ['*.example.com'], rules: rule('wild') },
      { name: 'exact', hostnames: ['a.example.com'], rules: rule('exact') },
      { name: 'any-newer', rules: rule('any-newer'), creationTimestamp: '2026-02-01T00:00:00Z' },
    ]);
    expect(v.match(L, 'A.example.com:80', '/x')?.backend?.pool).toBe('exact');
    expect(v.match(L, 'b.example.com', '/x')?.backend?.pool).toBe('wild');
    expect(v.match(L, 'example.com', '/x')?.backend?.pool).toBe('any');
    expect(v.match({ ...L, listener: 'other' }, 'example.com', '/x')).toBeUndefined();
  });

  it('rewrites a matched prefix segment-wise and normalizes hosts', () => {
    const v = view([
      {
        name: 'r',
        rules: [
          {
            index: 0,
            matches: [{ type: 'PathPrefix', value: '/llama/' }],
            backends: backend('p'),
            urlRewrite: { path: { type: 'ReplacePrefixMatch', replacePrefixMatch: '/' } },
          },
        ],
      },
    ]);
    expect(v.match(L, 'h', '/llama/v1/chat/completions')?.path).toBe('/v1/chat/completions');
    expect(v.match(L, 'h', '/llama')?.path).toBe('/');
    expect(normalizeHost('[::1]:8080')).toBe('::1');
    expect(normalizeHost('Example.COM.')).toBe('example.com');
  });
});
