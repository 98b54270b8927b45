import type { ModelRouteRecord } from '@triad/bus';
import type { ModelRouteSpec } from '@triad/crd';
import type { IncomingHeaders } from '@triad/request';
import { requestContext } from '@triad/request/testing';
import { RouteTable } from './route-table';

function route(name: string, spec: ModelRouteSpec, creationTimestamp?: string, resourceVersion?: string): ModelRouteRecord {
  return {
    schemaVersion: 1,
    namespace: 'ns',
    name,
    spec,
    ...(creationTimestamp ? { creationTimestamp } : {}),
    ...(resourceVersion ? { resourceVersion } : {}),
  };
}
const to = (server: string, weight = 100) => ({ modelServerName: server, weight });
const req = (model: string, headers: IncomingHeaders = {}, path = '/v1/chat/completions') =>
  requestContext({ body: { model }, path, headers });

describe('RouteTable (Kthena MatchModelTarget)', () => {
  it('matches modelName exactly, then LoRA adapters (no model rewrite for those)', () => {
    const t = new RouteTable();
    t.put(route('base', { modelName: 'llama', loraAdapters: ['sql-lora'], rules: [{ targetModels: [to('ms-a')] }] }));
    expect(t.resolve(req('llama'))).toEqual({
      route: 'ns/base',
      namespace: 'ns',
      modelServer: 'ms-a',
      provider: undefined,
      lora: false,
      rule: undefined,
    });
    expect(t.resolve(req('sql-lora'))).toMatchObject({ modelServer: 'ms-a', lora: true });
    expect(t.resolve(req('Llama'))).toBeUndefined();
  });

  it('prefers the oldest route and falls through to the next when its rules do not match', () => {
    const t = new RouteTable();
    t.put(route('young', { modelName: 'm', rules: [{ targetModels: [to('young-ms')] }] }, '2026-01-02T00:00:00Z'));
    t.put(
      route(
        'old',
        { modelName: 'm', rules: [{ modelMatch: { headers: { 'x-tier': { exact: 'gold' } } }, targetModels: [to('old-ms')] }] },
        '2026-01-01T00:00:00Z',
      ),
    );
    expect(t.resolve(req('m', { 'x-tier': 'gold' }))?.route).toBe('ns/old');
    expect(t.resolve(req('m', { 'x-tier': 'silver' }))?.route).toBe('ns/young');
  });

  it('orders equal timestamps by resourceVersion, then ns/name', () => {
    const t = new RouteTable();
    t.put(route('b', { modelName: 'm', rules: [{ targetModels: [to('b')] }] }, '2026-01-01T00:00:00Z', '20'));
    t.put(route('a', { modelName: 'm', rules: [{ targetModels: [to('a')] }] }, '2026-01-01T00:00:00Z', '100'));
    t.put(route('c', { modelName: 'm', rules: [{ targetModels: [to('c')] }] }, '2026-01-01T00:00:00Z', '20'));
    expect(t.resolve(req('m'))?.modelServer).toBe('b');
    t.delete('ns', 'b');
    expect(t.resolve(req('m'))?.modelServer).toBe('c');
  });

  it('takes the first rule whose header, uri and body.model conditions all match', () => {
    const t = new RouteTable();
    t.put(
      route('r', {
        modelName: 'm',
        rules: [
          {
            name: 'canary',
            modelMatch: { headers: { 'X-Canary': { exact: 'true' } }, uri: { prefix: '/v1/chat' } },
            targetModels: [to('canary')],
          },
          { name: 'regex', modelMatch: { headers: { 'x-user': { regex: '^team-[0-9]+$' } } }, targetModels: [to('team')] },
          { name: 'body', modelMatch: { body: { model: 'other' } }, targetModels: [to('never')] },
          { name: 'default', targetModels: [to('stable')] },
        ],
      }),
    );
    expect(t.resolve(req('m', { 'x-canary': 'true' }))).toMatchObject({ modelServer: 'canary', rule: 'canary' });
    expect(t.resolve(req('m', { 'x-canary': 'true' }, '/v1/completions'))?.modelServer).toBe('stable');
    expect(t.resolve(req('m', { 'x-user': 'team-42' }))?.modelServer).toBe('team');
    expect(t.resolve(req('m', { 'x-user': 'team-x' }))?.modelServer).toBe('stable');
  });

  it('picks weighted-random targets and never a zero-weight one', () => {
    let r = 0;
    const t = new RouteTable(() => r);
    t.put(route('w', { modelName: 'm', rules: [{ targetModels: [to('a', 30), to('zero', 0), to('b', 70)] }] }));
    const pick = (value: number) => {
      r = value;
      return t.resolve(req('m'))?.modelServer;
    };
    expect([pick(0), pick(0.29), pick(0.3), pick(0.99)]).toEqual(['a', 'a', 'b', 'b']);
  });

  it('falls through routes that cannot be served here: parentRefs (Gateway API only), all-zero weights', () => {
    const t = new RouteTable();
    t.put(route('gw', { modelName: 'm', parentRefs: [{ name: 'gw' }], rules: [{ targetModels: [to('gw')] }] }, '2026-01-01T00:00:00Z'));
    t.put(route('zero', { modelName: 'm', rules: [{ targetModels: [to('z', 0)] }] }, '2026-01-02T00:00:00Z'));
    t.put(route('last', { modelName: 'm', rules: [{ targetModels: [to('served')] }] }, '2026-01-04T00:00:00Z'));
    expect(t.resolve(req('m'))?.route).toBe('ns/last');
    t.delete('ns', 'last');
    expect(t.resolve(req('m'))).toBeUndefined();
  });

  it('resolves ExternalModelProvider targets, weighted with ModelServers, never for a LoRA name', () => {
    let r = 0;
    const t = new RouteTable(() => r);
    const ext = { externalModelProviderName: 'openai', weight: 50 };
    t.put(route('mix', { modelName: 'm', loraAdapters: ['lora'], rules: [{ targetModels: [to('local', 50), ext] }] }));
    expect(t.resolve(req('m'))).toMatchObject({ modelServer: 'local', provider: undefined });
    r = 0.75;
    expect(t.resolve(req('m'))).toMatchObject({ modelServer: '', provider: 'openai', lora: false });
    expect(t.resolve(req('lora'))).toBeUndefined();
  });

  it('lists model names and LoRA adapters for /v1/models', () => {
    const t = new RouteTable();
    t.put(route('a', { modelName: 'b-model', loraAdapters: ['a-lora'], rules: [{ targetModels: [to('x')] }] }));
    t.put(route('c', { loraAdapters: ['c-lora'], rules: [{ targetModels: [to('x')] }] }));
    expect(JSON.parse(t.modelsJson()).data.map((m: { id: string }) => m.id)).toEqual(['a-lora', 'b-model', 'c-lora']);
  });
});
