import { request } from 'node:http';
import {
  Buckets,
  GatewayRecordSchema,
  HttpRouteRecordSchema,
  inferencePoolServerName,
  objectKey,
  type GatewayRecord,
  type HttpRouteRecord,
} from '@triad/bus';
import type { SimEngineHandle } from '@triad/engine-sim';
import { freePort, waitFor } from '@triad/testing';
import { accessLines, inferenceRequests, NS, startHarness, type Harness } from './support/harness';

// Issue 19, Gateway API mode (Kthena's --enable-gateway-api): the gateway opens the listeners of the Gateway
// records the pod-watcher publishes (one server per port), picks a listener by Host, serves ModelRoutes attached
// to that listener and HTTPRoute rules (Exact / PathPrefix / RegularExpression, hostnames, weighted
// InferencePool backends, URLRewrite) to the InferencePools' ModelServers, scheduled like any other.

const MODEL = 'pool-model';
const GW = 'gw';

interface Answer {
  status: number;
  body: string;
}

/** POST with an explicit Host header (fetch does not let a test choose it). */
function post(port: number, path: string, host: string, body: unknown): Promise<Answer> {
  const data = Buffer.from(JSON.stringify(body));
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: 'POST',
        headers: { host, 'content-type': 'application/json', 'content-length': data.length },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
      },
    );
    req.on('error', reject);
    req.end(data);
  });
}

const chat = (model = MODEL) => ({ model, max_tokens: 4, messages: [{ role: 'user', content: 'hello' }] });

describe('gateway: Gateway API mode', () => {
  let h: Harness;
  let a: SimEngineHandle;
  let b: SimEngineHandle;
  let zero: SimEngineHandle;
  let mainPort: number;
  let extraPort: number;

  async function putGateway(
    record: Omit<GatewayRecord, 'schemaVersion' | 'namespace' | 'gatewayClassName' | 'virtual' | 'ignoredListeners'>,
  ) {
    const kv = await h.bus.kv(Buckets.gateways, GatewayRecordSchema);
    await kv.put(objectKey(NS, record.name), {
      schemaVersion: 1,
      namespace: NS,
      gatewayClassName: 'kthena-router',
      virtual: false,
      ignoredListeners: [],
      ...record,
    });
  }

  async function putHttpRoute(name: string, record: Pick<HttpRouteRecord, 'hostnames' | 'parents' | 'rules'>, created?: string) {
    const kv = await h.bus.kv(Buckets.httpRoutes, HttpRouteRecordSchema);
    await kv.put(objectKey(NS, name), {
      schemaVersion: 1,
      namespace: NS,
      name,
      ...(created ? { creationTimestamp: created } : {}),
      ...record,
    });
  }

  const backend = (pool: string, weight = 1, port = 8000) => ({
    namespace: NS,
    name: pool,
    weight,
    modelServer: inferencePoolServerName(pool),
    port,
  });
  const parent = (listener: string, port: number) => ({ namespace: NS, gateway: GW, listener, port });

  beforeAll(async () => {
    h = await startHarness({ config: { gatewayApi: true } });
    mainPort = h.gateway.port;
    extraPort = await freePort();
    [a, b, zero] = await Promise.all([
      h.startSim({ engine: 'vllm', role: 'both', host: '127.0.0.1', model: MODEL }),
      // Pools get the request's model as it is (no ModelServer.spec.model): these two also serve `attached`.
      h.startSim({ engine: 'vllm', role: 'both', host: '127.0.0.1', model: MODEL, loraAdapters: ['attached'] }),
      h.startSim({ engine: 'vllm', role: 'both', host: '127.0.0.1', model: MODEL, loraAdapters: ['attached'] }),
    ]);
    const endpoints = new Map<string, Awaited<ReturnType<Harness['putEndpoint']>>>();
    for (const [pool, sim] of [
      ['pool-a', a],
      ['pool-b', b],
      ['pool-zero', zero],
    ] as const) {
      const server = inferencePoolServerName(pool);
      await h.putServer(server, {
        inferenceEngine: 'vLLM',
        workloadSelector: { matchLabels: { pool } },
        workloadPort: { port: sim.port, protocol: 'http' },
      });
      endpoints.set(server, await h.putEndpoint(server, `${pool}-0`, 'aggregated', sim));
    }
    // The scheduler stand-in answers with the one endpoint of the pool the gateway asked about.
    h.decide = (r) => {
      const ep = endpoints.get(r.modelServer);
      return ep
        ? { id: r.id, ok: true, mode: 'aggregated', attempts: [{ endpoint: ep }], encoders: [] }
        : { id: r.id, ok: false, code: 'SCHED_UNKNOWN_MODEL_SERVER', message: r.modelServer };
    };
    await putGateway({
      name: GW,
      listeners: [
        { name: 'api', port: mainPort, hostname: 'api.example.com' },
        { name: 'wild', port: mainPort, hostname: '*.example.com' },
        { name: 'plain', port: extraPort },
      ],
    });
    await putHttpRoute('llama', {
      hostnames: [],
      parents: [parent('api', mainPort)],
      rules: [
        {
          index: 0,
          matches: [{ type: 'PathPrefix', value: '/llama' }],
          backends: [backend('pool-a')],
          urlRewrite: { path: { type: 'ReplacePrefixMatch', replacePrefixMatch: '/v1' } },
        },
        { index: 1, matches: [{ type: 'Exact', value: '/v1/chat/completions' }], backends: [backend('pool-b')] },
        {
          index: 2,
          matches: [{ type: 'RegularExpression', value: '/re/[a-z]+/generate' }],
          backends: [backend('pool-a')],
          urlRewrite: { hostname: 'backend.internal', path: { type: 'ReplaceFullPath', replaceFullPath: '/v1/completions' } },
        },
        {
          index: 3,
          matches: [{ type: 'PathPrefix', value: '/weighted' }],
          backends: [backend('pool-a', 3), backend('pool-b', 1), backend('pool-zero', 0)],
          urlRewrite: { path: { type: 'ReplaceFullPath', replaceFullPath: '/v1/chat/completions' } },
        },
        { index: 4, matches: [{ type: 'PathPrefix', value: '/nobackend' }], backends: [] },
      ],
    });
    // Only for Host chat.example.com (the wildcard listener); a longer prefix than `llama`'s `/` would be.
    await putHttpRoute('chat-host', {
      hostnames: ['chat.example.com'],
      parents: [parent('wild', mainPort)],
      rules: [{ index: 0, matches: [{ type: 'PathPrefix', value: '/' }], backends: [backend('pool-b')] }],
    });
    await putHttpRoute('plain', {
      hostnames: [],
      parents: [parent('plain', extraPort)],
      rules: [{ index: 0, matches: [{ type: 'PathPrefix', value: '/' }], backends: [backend('pool-zero')] }],
    });
    // A ModelRoute with parentRefs, attached (by the pod-watcher) to the `api` listener only.
    await h.putServer('direct', {
      model: MODEL,
      inferenceEngine: 'vLLM',
      workloadSelector: { matchLabels: { app: 'direct' } },
      workloadPort: { port: a.port, protocol: 'http' },
    });
    endpoints.set('direct', await h.putEndpoint('direct', 'direct-0', 'aggregated', a));
    await h.putRoute(
      'attached',
      {
        modelName: 'attached',
        parentRefs: [{ name: GW, sectionName: 'api' }],
        rules: [{ targetModels: [{ modelServerName: 'direct', weight: 100 }] }],
      },
      { listeners: [parent('api', mainPort)] },
    );
    await h.waitForModel('attached');
    await waitFor(async () => (await post(extraPort, '/v1/chat/completions', 'x', chat()).catch(() => ({ status: 0 }))).status === 200, {
      what: 'the extra listener port open',
    });
  });

  afterAll(async () => {
    await h?.close();
  });

  const served = (sim: SimEngineHandle) => inferenceRequests(sim).length;

  it('picks the listener by Host (exact, then wildcard, then none) and answers 404 when no listener matches', async () => {
    const res = await post(mainPort, '/v1/chat/completions', 'other.org', chat());
    expect(res.status).toBe(404);
    expect(JSON.parse(res.body).error).toMatchObject({ message: 'No matching listener found', code: 'GATEWAY_PATH_NOT_FOUND' });
    // api.example.com: the exact listener, whose route sends the exact path to pool-b.
    const before = served(b);
    expect((await post(mainPort, '/v1/chat/completions', 'api.example.com:8080', chat())).status).toBe(200);
    expect(served(b)).toBe(before + 1);
    // chat.example.com: the wildcard listener, where only chat-host is attached (also pool-b, any path).
    expect((await post(mainPort, '/v1/chat/completions', 'chat.example.com', chat())).status).toBe(200);
    expect(served(b)).toBe(before + 2);
    // The same path on the wildcard listener with a Host the route does not name: nothing serves it.
    const none = await post(mainPort, '/v1/chat/completions', 'x.example.com', chat());
    expect(none.status).toBe(404);
    expect(JSON.parse(none.body).error.message).toContain('no ModelRoute or HTTPRoute');
  });

  it('serves each listener port with its own server and routes', async () => {
    zero.clearRequests();
    expect((await post(extraPort, '/v1/chat/completions', 'whatever', chat())).status).toBe(200);
    expect(inferenceRequests(zero)).toHaveLength(1);
  });

  it('rewrites the matched prefix and the full path (and the Host) as URLRewrite says', async () => {
    a.clearRequests();
    expect((await post(mainPort, '/llama/chat/completions', 'api.example.com', chat())).status).toBe(200);
    expect((await post(mainPort, '/re/abc/generate', 'api.example.com', { model: MODEL, prompt: 'x', max_tokens: 2 })).status).toBe(200);
    const sent = inferenceRequests(a);
    expect(sent.map((r) => r.path)).toEqual(['/v1/chat/completions', '/v1/completions']);
    expect(sent[1]?.headers['host']).toBe('backend.internal');
    // A regex matches the whole path only; a path off /v1/ without an HTTPRoute is a path without a route.
    const unmatched = await post(mainPort, '/re/abc/generate/more', 'api.example.com', chat());
    expect(unmatched.status).toBe(404);
    expect(JSON.parse(unmatched.body).error).toMatchObject({
      code: 'GATEWAY_PATH_NOT_FOUND',
      message: 'There is no route for POST /re/abc/generate/more: no HTTPRoute of this listener matches it',
    });
  });

  it('spreads a rule over weighted InferencePool backends and never sends to weight 0', async () => {
    const [ba, bb, bz] = [served(a), served(b), served(zero)];
    for (let i = 0; i < 40; i++) expect((await post(mainPort, '/weighted/x', 'api.example.com', chat())).status).toBe(200);
    expect(served(zero)).toBe(bz);
    expect(served(a) - ba).toBeGreaterThan(served(b) - bb);
    expect(served(b) - bb).toBeGreaterThan(0);
  });

  it('answers 500 for a matched rule without backends', async () => {
    const res = await post(mainPort, '/nobackend', 'api.example.com', chat());
    expect(res.status).toBe(500);
    expect(JSON.parse(res.body).error.message).toContain('no InferencePool backend');
  });

  it('serves ModelRoutes with parentRefs on their listener only, before HTTPRoutes, and never outside Gateway mode ports', async () => {
    a.clearRequests();
    const res = await post(mainPort, '/v1/chat/completions', 'api.example.com', chat('attached'));
    expect(res.status).toBe(200);
    expect(inferenceRequests(a)).toHaveLength(1);
    await waitFor(() => accessLines(h).some((l) => l['model_name'] === 'attached' && l['model_route'] === `${NS}/attached`), {
      what: 'the access log naming the ModelRoute',
    });
    // The wildcard listener has no ModelRoute attached: chat-host (an HTTPRoute) takes it.
    const before = served(b);
    expect((await post(mainPort, '/v1/chat/completions', 'chat.example.com', chat('attached'))).status).toBe(200);
    expect(served(b)).toBe(before + 1);
    // The plain listener has no ModelRoute either: its HTTPRoute serves every path.
    expect((await post(extraPort, '/v1/chat/completions', 'any', chat('attached'))).status).toBe(200);
  });

  it('closes a listener port when no Gateway uses it any more', async () => {
    await putGateway({ name: GW, listeners: [{ name: 'api', port: mainPort, hostname: 'api.example.com' }] });
    await waitFor(
      async () =>
        (await post(extraPort, '/x', 'any', chat()).then(
          () => 'open',
          () => 'closed',
        )) === 'closed',
      {
        what: 'the extra port closed',
      },
    );
    // Gateway mode without a listener for the Host on the main port any more.
    expect((await post(mainPort, '/v1/chat/completions', 'chat.example.com', chat())).status).toBe(404);
  });
});
