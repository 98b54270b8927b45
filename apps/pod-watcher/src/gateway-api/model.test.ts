import {
  GatewaySchema,
  HttpRouteSchema,
  InferencePoolSchema,
  ModelRouteSchema,
  type Gateway,
  type HttpRoute,
  type InferencePool,
  type ModelRoute,
} from '@triad/crd';
import { buildGatewayApiModel, type GatewayApiInput } from './model';
import { mergeRouteParents, routeParentsDiffer } from './route-parents';

const now = new Date('2026-01-01T00:00:00Z');
const gateway = (ns: string, name: string, listeners: unknown[], gatewayClassName = 'kthena-router'): Gateway =>
  GatewaySchema.parse({
    apiVersion: 'gateway.networking.k8s.io/v1',
    kind: 'Gateway',
    metadata: { name, namespace: ns },
    spec: { gatewayClassName, listeners },
  });
const httpRoute = (ns: string, name: string, spec: Record<string, unknown>, generation = 2): HttpRoute =>
  HttpRouteSchema.parse({
    apiVersion: 'gateway.networking.k8s.io/v1',
    kind: 'HTTPRoute',
    metadata: { name, namespace: ns, generation },
    spec,
  });
const pool = (ns: string, name: string, port = 8000): InferencePool =>
  InferencePoolSchema.parse({
    apiVersion: 'inference.networking.k8s.io/v1',
    kind: 'InferencePool',
    metadata: { name, namespace: ns },
    spec: { selector: { matchLabels: { app: name } }, targetPorts: [{ number: port }] },
  });
const modelRoute = (ns: string, name: string, parentRefs?: unknown[]): ModelRoute =>
  ModelRouteSchema.parse({
    apiVersion: 'networking.serving.volcano.sh/v1alpha1',
    kind: 'ModelRoute',
    metadata: { name, namespace: ns },
    spec: { modelName: name, ...(parentRefs ? { parentRefs } : {}), rules: [] },
  });
const backend = (name: string, extra: Record<string, unknown> = {}) => ({
  group: 'inference.networking.k8s.io',
  kind: 'InferencePool',
  name,
  ...extra,
});

function model(over: Partial<GatewayApiInput>) {
  return buildGatewayApiModel({
    classes: new Set(['kthena-router']),
    gateways: [],
    httpRoutes: [],
    pools: [],
    modelRoutes: [],
    namespaceLabels: () => undefined,
    now,
    ...over,
  });
}
const conditions = (m: ReturnType<typeof model>, id: string) =>
  (m.routeParents.get(id) ?? []).map((p) => p.conditions.map((c) => `${c.type}=${c.status}/${c.reason}`));

describe('Gateway API model', () => {
  it('serves HTTP listeners of its classes only, and publishes the default Gateway unless a real one replaces it', () => {
    const m = model({
      defaultGateway: { namespace: 'kthena-system', name: 'default', port: 8080 },
      gateways: [
        gateway('kthena-system', 'kthena-gateway', [
          { name: 'http', port: 8081, protocol: 'HTTP', hostname: '*.example.com' },
          { name: 'tls', port: 8443, protocol: 'HTTPS' },
        ]),
        gateway('other', 'istio', [{ name: 'http', port: 80, protocol: 'HTTP' }], 'istio'),
      ],
    });
    expect([...m.gateways.keys()].sort()).toEqual(['kthena-system.default', 'kthena-system.kthena-gateway']);
    expect(m.gateways.get('kthena-system.default')).toMatchObject({ virtual: true, listeners: [{ name: 'default', port: 8080 }] });
    expect(m.gateways.get('kthena-system.kthena-gateway')).toMatchObject({
      virtual: false,
      listeners: [{ name: 'http', port: 8081, hostname: '*.example.com' }],
      ignoredListeners: [{ name: 'tls', protocol: 'HTTPS' }],
    });
    const replaced = model({
      defaultGateway: { namespace: 'ns', name: 'default', port: 8080 },
      gateways: [gateway('ns', 'default', [{ name: 'web', port: 9000, protocol: 'HTTP' }])],
    });
    expect(replaced.gateways.get('ns.default')).toMatchObject({ virtual: false, listeners: [{ name: 'web', port: 9000 }] });
  });

  it("attaches Kthena's example HTTPRoute to the default Gateway and resolves its InferencePool backend", () => {
    const m = model({
      defaultGateway: { namespace: 'kthena-system', name: 'default', port: 8080 },
      httpRoutes: [
        httpRoute('default', 'llm-route', {
          parentRefs: [{ group: 'gateway.networking.k8s.io', kind: 'Gateway', name: 'default', namespace: 'kthena-system' }],
          rules: [{ backendRefs: [backend('deepseek-r1-1-5b')], matches: [{ path: { type: 'PathPrefix', value: '/' } }] }],
        }),
      ],
      pools: [pool('default', 'deepseek-r1-1-5b')],
    });
    expect(m.httpRoutes.get('default.llm-route')).toMatchObject({
      parents: [{ namespace: 'kthena-system', gateway: 'default', listener: 'default', port: 8080 }],
      rules: [
        {
          index: 0,
          matches: [{ type: 'PathPrefix', value: '/' }],
          backends: [
            { namespace: 'default', name: 'deepseek-r1-1-5b', weight: 1, modelServer: 'inferencepool=deepseek-r1-1-5b', port: 8000 },
          ],
        },
      ],
    });
    expect(conditions(m, 'default/llm-route')).toEqual([['Accepted=True/Accepted', 'ResolvedRefs=True/ResolvedRefs']]);
    expect(m.routeParents.get('default/llm-route')?.[0]).toMatchObject({
      controllerName: 'triad.io/gateway-controller',
      parentRef: { group: 'gateway.networking.k8s.io', kind: 'Gateway', namespace: 'kthena-system', name: 'default' },
    });
  });

  it('reports unsupported matches, missing pools and foreign backends on the status instead of dropping them silently', () => {
    const m = model({
      gateways: [gateway('gw', 'g', [{ name: 'http', port: 8081, protocol: 'HTTP', allowedRoutes: { namespaces: { from: 'All' } } }])],
      httpRoutes: [
        httpRoute('llm', 'r', {
          parentRefs: [{ name: 'g', namespace: 'gw' }],
          rules: [
            {
              matches: [{ path: { type: 'Exact', value: '/v1/chat/completions' } }, { headers: [{ name: 'x-tier', value: 'gold' }] }],
              backendRefs: [backend('a', { weight: 3 }), backend('gone')],
            },
            { backendRefs: [{ name: 'svc', port: 80 }] },
          ],
        }),
      ],
      pools: [pool('llm', 'a')],
    });
    expect(conditions(m, 'llm/r')).toEqual([
      ['Accepted=True/Accepted', 'ResolvedRefs=False/InvalidKind', 'PartiallyInvalid=True/UnsupportedValue'],
    ]);
    const partial = m.routeParents.get('llm/r')?.[0]?.conditions[2];
    expect(partial?.message).toBe('spec.rules[0].matches[1]: headers matching is not supported (paths only); this match is ignored');
    expect(partial?.observedGeneration).toBe(2);
    expect(m.httpRoutes.get('llm.r')?.rules).toEqual([
      {
        index: 0,
        matches: [{ type: 'Exact', value: '/v1/chat/completions' }],
        backends: [{ namespace: 'llm', name: 'a', weight: 3, modelServer: 'inferencepool=a', port: 8000 }],
      },
      { index: 1, matches: [{ type: 'PathPrefix', value: '/' }], backends: [] },
    ]);
    const onlyMissing = model({
      gateways: [gateway('llm', 'g', [{ name: 'http', port: 8081, protocol: 'HTTP' }])],
      httpRoutes: [httpRoute('llm', 'r', { parentRefs: [{ name: 'g' }], rules: [{ backendRefs: [backend('gone')] }] })],
    });
    expect(onlyMissing.routeParents.get('llm/r')?.[0]?.conditions[1]).toMatchObject({
      status: 'False',
      reason: 'BackendNotFound',
      message: 'InferencePool llm/gone not found',
    });
  });

  it('applies allowedRoutes (namespaces Same/All/Selector, kinds), sectionName, port and hostnames', () => {
    const gw = gateway('gw', 'g', [
      { name: 'same', port: 8001, protocol: 'HTTP' },
      {
        name: 'teams',
        port: 8002,
        protocol: 'HTTP',
        allowedRoutes: { namespaces: { from: 'Selector', selector: { matchLabels: { team: 'llm' } } } },
      },
      { name: 'grpc-only', port: 8003, protocol: 'HTTP', allowedRoutes: { namespaces: { from: 'All' }, kinds: [{ kind: 'GRPCRoute' }] } },
      { name: 'api', port: 8004, protocol: 'HTTP', hostname: 'api.example.com', allowedRoutes: { namespaces: { from: 'All' } } },
    ]);
    const route = (name: string, ref: Record<string, unknown>, hostnames?: string[]) =>
      httpRoute('llm', name, { parentRefs: [{ name: 'g', namespace: 'gw', ...ref }], ...(hostnames ? { hostnames } : {}) });
    const m = model({
      gateways: [gw],
      httpRoutes: [
        route('all', {}),
        route('same', { sectionName: 'same' }),
        route('grpc', { sectionName: 'grpc-only' }),
        route('nope', { sectionName: 'missing' }),
        route('host', { port: 8004 }, ['chat.example.com']),
        route('host-ok', { port: 8004 }, ['api.example.com']),
      ],
      namespaceLabels: (ns) => (ns === 'llm' ? { team: 'llm' } : undefined),
    });
    expect(m.httpRoutes.get('llm.all')?.parents.map((p) => p.listener)).toEqual(['teams', 'api']);
    expect(conditions(m, 'llm/same')[0]?.[0]).toBe('Accepted=False/NotAllowedByListeners');
    expect(conditions(m, 'llm/grpc')[0]?.[0]).toBe('Accepted=False/NotAllowedByListeners');
    expect(conditions(m, 'llm/nope')[0]?.[0]).toBe('Accepted=False/NoMatchingParent');
    expect(conditions(m, 'llm/host')[0]?.[0]).toBe('Accepted=False/NoMatchingListenerHostname');
    expect(m.httpRoutes.get('llm.host-ok')?.parents).toEqual([{ namespace: 'gw', gateway: 'g', listener: 'api', port: 8004 }]);
    expect(m.httpRoutes.has('llm.same')).toBe(false);
  });

  it('attaches ModelRoutes as Kthena does: parentRefs select listeners; without them, the Gateways of their namespace', () => {
    const m = model({
      defaultGateway: { namespace: 'kthena-system', name: 'default', port: 8080 },
      gateways: [
        gateway('llm', 'local', [
          { name: 'a', port: 9001, protocol: 'HTTP' },
          { name: 'b', port: 9002, protocol: 'HTTP' },
        ]),
      ],
      modelRoutes: [
        modelRoute('default', 'bound', [{ name: 'default', namespace: 'kthena-system', kind: 'Gateway' }]),
        modelRoute('llm', 'section', [{ name: 'local', sectionName: 'b' }]),
        modelRoute('llm', 'plain'),
        modelRoute('llm', 'elsewhere', [{ name: 'unknown' }]),
      ],
    });
    expect(m.modelRouteListeners.get('default/bound')).toEqual([
      { namespace: 'kthena-system', gateway: 'default', listener: 'default', port: 8080 },
    ]);
    expect(m.modelRouteListeners.get('llm/section')).toEqual([{ namespace: 'llm', gateway: 'local', listener: 'b', port: 9002 }]);
    expect(m.modelRouteListeners.get('llm/plain')?.map((l) => l.listener)).toEqual(['a', 'b']);
    expect(m.modelRouteListeners.get('llm/elsewhere')).toEqual([]);
  });
});

describe('route status parents', () => {
  const ours = (status: 'True' | 'False', time: string) => ({
    parentRef: { group: 'gateway.networking.k8s.io', kind: 'Gateway', namespace: 'gw', name: 'g' },
    controllerName: 'triad.io/gateway-controller',
    conditions: [
      { type: 'Accepted', status, reason: status === 'True' ? 'Accepted' : 'NoMatchingParent', message: 'm', lastTransitionTime: time },
    ],
  });
  const theirs = {
    parentRef: { group: 'gateway.networking.k8s.io', kind: 'Gateway', namespace: 'x', name: 'istio' },
    controllerName: 'istio.io/gateway-controller',
    conditions: [],
  };

  it("keeps other controllers' entries and transition times, and sees only real changes", () => {
    const current = [theirs, ours('True', '2025-01-01T00:00:00Z')];
    expect(routeParentsDiffer(current, [ours('True', '2026-01-01T00:00:00Z')])).toBe(false);
    expect(routeParentsDiffer(current, [ours('False', '2026-01-01T00:00:00Z')])).toBe(true);
    expect(routeParentsDiffer(current, [])).toBe(true);
    const merged = mergeRouteParents(current, [ours('True', '2026-01-01T00:00:00Z')]);
    expect(merged).toEqual([theirs, ours('True', '2025-01-01T00:00:00Z')]);
    expect(mergeRouteParents(current, [])).toEqual([theirs]);
  });
});
