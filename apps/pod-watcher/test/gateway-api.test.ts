import {
  Buckets,
  EndpointRecordSchema,
  GatewayRecordSchema,
  HttpRouteRecordSchema,
  ModelRouteRecordSchema,
  ModelServerRecordSchema,
} from '@triad/bus';
import { API_VERSION } from '@triad/crd';
import { waitFor } from '@triad/testing';
import type { KubeObject } from '@triad/testing/kube';
import type { KvMirror, TestWatcher } from './support/harness';
import { startKubeWatcherStack, type KubeWatcherStack } from './support/kube-watcher';
import { pod } from './support/objects';

// Gateway API mode (`--gateway-api`) with the kube source: Kthena's example Gateway, HTTPRoute, InferencePool
// and gateway-bound ModelRoute applied unchanged, plus the cases Kthena handles by skipping (unsupported
// matches), all through real client-node informers on the fake API server into real NATS KV.
jest.setTimeout(60_000);

const GW = 'gateway.networking.k8s.io/v1';
const gatewayExample: KubeObject = {
  apiVersion: GW,
  kind: 'Gateway',
  metadata: { name: 'kthena-gateway', namespace: 'kthena-system' },
  spec: { gatewayClassName: 'kthena-router', listeners: [{ name: 'http', port: 8081, protocol: 'HTTP' }] },
};
const httpRouteExample: KubeObject = {
  apiVersion: GW,
  kind: 'HTTPRoute',
  metadata: { name: 'llm-route', namespace: 'default' },
  spec: {
    parentRefs: [{ group: 'gateway.networking.k8s.io', kind: 'Gateway', name: 'default', namespace: 'kthena-system' }],
    rules: [
      {
        backendRefs: [{ group: 'inference.networking.k8s.io', kind: 'InferencePool', name: 'deepseek-r1-1-5b' }],
        matches: [{ path: { type: 'PathPrefix', value: '/' } }],
      },
    ],
  },
};
const poolExample: KubeObject = {
  apiVersion: 'inference.networking.k8s.io/v1',
  kind: 'InferencePool',
  metadata: { name: 'deepseek-r1-1-5b', namespace: 'default' },
  spec: {
    targetPorts: [{ number: 8000 }],
    selector: { matchLabels: { app: 'deepseek-r1-1-5b' } },
    endpointPickerRef: { name: 'deepseek-r1-1-5b', port: { number: 8080 } },
  },
};
const boundRouteExample: KubeObject = {
  apiVersion: API_VERSION,
  kind: 'ModelRoute',
  metadata: { name: 'deepseek-binding-gateway', namespace: 'default' },
  spec: {
    modelName: 'deepseek-binding-gateway',
    parentRefs: [{ name: 'default', namespace: 'kthena-system', kind: 'Gateway' }],
    rules: [{ name: 'default', targetModels: [{ modelServerName: 'deepseek-r1-1-5b' }] }],
  },
};

describe('pod-watcher in Gateway API mode (fake API server, real NATS)', () => {
  let stack: KubeWatcherStack;
  let watcher: TestWatcher;
  let gateways: KvMirror<typeof GatewayRecordSchema>;
  let httpRoutes: KvMirror<typeof HttpRouteRecordSchema>;
  let routes: KvMirror<typeof ModelRouteRecordSchema>;
  let servers: KvMirror<typeof ModelServerRecordSchema>;
  let endpoints: KvMirror<typeof EndpointRecordSchema>;

  type Parent = {
    controllerName: string;
    parentRef: { name: string };
    conditions: { type: string; status: string; reason: string; message: string }[];
  };
  const parents = (ns: string, name: string) =>
    (stack.kube.get(GW, 'HTTPRoute', ns, name)?.status as { parents?: Parent[] } | undefined)?.parents ?? [];
  const conditionsOf = (ns: string, name: string) =>
    parents(ns, name)
      .filter((p) => p.controllerName === 'triad.io/gateway-controller')
      .map((p) => p.conditions.map((c) => `${c.type}=${c.status}/${c.reason}`));

  beforeAll(async () => {
    stack = await startKubeWatcherStack('triad-pw-gwapi-');
    for (const o of [gatewayExample, httpRouteExample, poolExample, boundRouteExample]) stack.kube.apply(o);
    stack.kube.apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'default', labels: { team: 'llm' } } });
    stack.kube.apply(pod('ds-0', { app: 'deepseek-r1-1-5b' }, { ip: '127.0.8.1' }));
    stack.kube.apply(pod('ds-1', { app: 'deepseek-r1-1-5b' }, { ip: '127.0.8.2' }));
    watcher = await stack.startWatcher({ gatewayApi: true, defaultGateway: 'kthena-system/default:8080' });
    gateways = await stack.mirror(Buckets.gateways, GatewayRecordSchema);
    httpRoutes = await stack.mirror(Buckets.httpRoutes, HttpRouteRecordSchema);
    routes = await stack.mirror(Buckets.modelRoutes, ModelRouteRecordSchema);
    servers = await stack.mirror(Buckets.modelServers, ModelServerRecordSchema);
    endpoints = await stack.mirror(Buckets.endpoints, EndpointRecordSchema);
  }, 120_000);

  afterAll(async () => stack?.close());

  it('watches the Gateway API kinds and Namespaces only in this mode', () => {
    for (const path of [
      '/apis/gateway.networking.k8s.io/v1/gateways',
      '/apis/gateway.networking.k8s.io/v1/httproutes',
      '/apis/inference.networking.k8s.io/v1/inferencepools',
      '/api/v1/namespaces',
    ]) {
      expect(stack.kube.requests.some((r) => r.path === path && r.verb === 'list')).toBe(true);
    }
    expect(watcher.gatewayApi).toBeDefined();
  });

  it('publishes the Gateways of its classes and the default Gateway', async () => {
    await waitFor(() => gateways.keys().length === 2, { what: 'two gateways' });
    expect(gateways.get('kthena-system.kthena-gateway')).toMatchObject({
      virtual: false,
      gatewayClassName: 'kthena-router',
      listeners: [{ name: 'http', port: 8081 }],
    });
    expect(gateways.get('kthena-system.default')).toMatchObject({ virtual: true, listeners: [{ name: 'default', port: 8080 }] });
  });

  it('publishes the InferencePool as an aggregated ModelServer whose pods are endpoints the scheduler can pick', async () => {
    await waitFor(() => endpoints.keys('default.inferencepool=deepseek-r1-1-5b.').length === 2, { what: 'pool endpoints' });
    expect(servers.get('default.inferencepool=deepseek-r1-1-5b')).toMatchObject({
      mode: 'aggregated',
      origin: { kind: 'InferencePool', name: 'deepseek-r1-1-5b' },
      spec: { inferenceEngine: 'vLLM', workloadPort: { port: 8000 }, workloadSelector: { matchLabels: { app: 'deepseek-r1-1-5b' } } },
    });
    expect(endpoints.get('default.inferencepool=deepseek-r1-1-5b.ds-0')).toMatchObject({
      role: 'aggregated',
      ip: '127.0.8.1',
      port: 8000,
      engine: 'vLLM',
      modelServer: 'inferencepool=deepseek-r1-1-5b',
    });
  });

  it("publishes Kthena's example HTTPRoute attached to the default Gateway, and accepts it in its status", async () => {
    await waitFor(() => httpRoutes.get('default.llm-route'), { what: 'httproute record' });
    expect(httpRoutes.get('default.llm-route')).toMatchObject({
      parents: [{ namespace: 'kthena-system', gateway: 'default', listener: 'default', port: 8080 }],
      rules: [
        {
          matches: [{ type: 'PathPrefix', value: '/' }],
          backends: [{ name: 'deepseek-r1-1-5b', modelServer: 'inferencepool=deepseek-r1-1-5b', port: 8000, weight: 1 }],
        },
      ],
    });
    await waitFor(() => conditionsOf('default', 'llm-route').length === 1, { what: 'route status' });
    expect(conditionsOf('default', 'llm-route')).toEqual([['Accepted=True/Accepted', 'ResolvedRefs=True/ResolvedRefs']]);
  });

  it('attaches the gateway-bound ModelRoute to the Gateway it names instead of skipping it', async () => {
    await waitFor(() => routes.get('default.deepseek-binding-gateway')?.listeners?.length === 1, { what: 'route attached' });
    expect(routes.get('default.deepseek-binding-gateway')?.listeners).toEqual([
      { namespace: 'kthena-system', gateway: 'default', listener: 'default', port: 8080 },
    ]);
  });

  it("reports unsupported matches on the route status (not silently dropped), and keeps other controllers' entries", async () => {
    stack.kube.apply({
      apiVersion: GW,
      kind: 'HTTPRoute',
      metadata: { name: 'tiers', namespace: 'default' },
      spec: {
        parentRefs: [
          { name: 'kthena-gateway', namespace: 'kthena-system', sectionName: 'http' },
          { name: 'istio', namespace: 'other' },
        ],
        rules: [
          {
            matches: [{ path: { type: 'PathPrefix', value: '/v1' }, headers: [{ name: 'x-tier', value: 'gold' }] }, { method: 'GET' }],
            backendRefs: [{ group: 'inference.networking.k8s.io', kind: 'InferencePool', name: 'deepseek-r1-1-5b' }],
          },
        ],
      },
      status: {
        parents: [{ parentRef: { name: 'istio', namespace: 'other' }, controllerName: 'istio.io/gateway-controller', conditions: [] }],
      },
    });
    await waitFor(() => conditionsOf('default', 'tiers').length === 1, { what: 'tiers status' });
    // kthena-gateway allows routes from its own namespace only (the Gateway API default).
    expect(conditionsOf('default', 'tiers')).toEqual([
      ['Accepted=False/NotAllowedByListeners', 'ResolvedRefs=True/ResolvedRefs', 'PartiallyInvalid=True/UnsupportedValue'],
    ]);
    const partial = parents('default', 'tiers')
      .find((p) => p.controllerName === 'triad.io/gateway-controller')
      ?.conditions.find((c) => c.type === 'PartiallyInvalid');
    expect(partial?.message).toBe(
      'spec.rules[0].matches[0]: headers matching is not supported (paths only); this match is ignored; spec.rules[0].matches[1]: method matching is not supported (paths only); this match is ignored',
    );
    expect(parents('default', 'tiers').map((p) => p.controllerName)).toEqual([
      'istio.io/gateway-controller',
      'triad.io/gateway-controller',
    ]);
    expect(httpRoutes.get('default.tiers')).toBeUndefined();
    stack.kube.apply({
      ...gatewayExample,
      spec: {
        ...(gatewayExample.spec as object),
        listeners: [
          {
            name: 'http',
            port: 8081,
            protocol: 'HTTP',
            allowedRoutes: { namespaces: { from: 'Selector', selector: { matchLabels: { team: 'llm' } } } },
          },
        ],
      },
    });
    await waitFor(() => httpRoutes.get('default.tiers'), { what: 'tiers attached once the namespace is allowed' });
    expect(httpRoutes.get('default.tiers')).toMatchObject({
      parents: [{ gateway: 'kthena-gateway', listener: 'http', port: 8081 }],
      rules: [{ matches: [], backends: [{ name: 'deepseek-r1-1-5b' }] }],
    });
    await waitFor(() => conditionsOf('default', 'tiers')[0]?.[0] === 'Accepted=True/Accepted', { what: 'accepted now' });
  });

  it('follows the pool: a relabelled pod leaves it, a deleted pool empties it and the route reports BackendNotFound', async () => {
    stack.kube.apply(pod('ds-1', { app: 'other' }, { ip: '127.0.8.2' }));
    await waitFor(() => endpoints.keys('default.inferencepool=deepseek-r1-1-5b.').length === 1, { what: 'one endpoint left' });
    stack.kube.remove('inference.networking.k8s.io/v1', 'InferencePool', 'default', 'deepseek-r1-1-5b');
    await waitFor(() => endpoints.keys('default.inferencepool=').length === 0 && !servers.get('default.inferencepool=deepseek-r1-1-5b'), {
      what: 'pool gone',
    });
    await waitFor(() => conditionsOf('default', 'llm-route')[0]?.[1] === 'ResolvedRefs=False/BackendNotFound', { what: 'BackendNotFound' });
    expect(httpRoutes.get('default.llm-route')?.rules[0]?.backends).toEqual([]);
  });

  it("removes Triad's status entry when a route stops naming its Gateways", async () => {
    stack.kube.apply({
      ...httpRouteExample,
      spec: { ...(httpRouteExample.spec as object), parentRefs: [{ name: 'istio', namespace: 'other' }] },
    });
    await waitFor(() => conditionsOf('default', 'llm-route').length === 0 && !httpRoutes.get('default.llm-route'), {
      what: 'entry removed',
    });
  });
});
