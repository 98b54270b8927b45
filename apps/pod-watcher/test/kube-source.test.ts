import { Buckets, EndpointRecordSchema, ModelRouteRecordSchema, ModelServerRecordSchema } from '@triad/bus';
import { API_VERSION } from '@triad/crd';
import { waitFor } from '@triad/testing';
import { servedPod, type KubeObject } from '@triad/testing/kube';
import type { KvMirror, TestWatcher } from './support/harness';
import { startKubeWatcherStack, type KubeWatcherStack } from './support/kube-watcher';
import { modelRoute, modelServer, pod } from './support/objects';

// Nothing listens on these addresses: scrapes fail fast and the endpoints are marked stale, which is all these
// tests need (discovery, classification and status are what they check).
jest.setTimeout(30_000);

const ip = (n: number) => `127.0.9.${n}`;
const labels = (role: string, group = 'g1') => ({ app: 'qwen', group, role });

describe('pod-watcher with the kube source (fake API server, real client-node informers, real NATS)', () => {
  let stack: KubeWatcherStack;
  let watcher: TestWatcher;
  let endpoints: KvMirror<typeof EndpointRecordSchema>;
  let servers: KvMirror<typeof ModelServerRecordSchema>;
  let routes: KvMirror<typeof ModelRouteRecordSchema>;

  const apply = (o: object) => stack.kube.apply(o as KubeObject);
  const role = (podName: string, ms = 'qwen') => endpoints.get(`default.${ms}.${podName}`)?.role;
  const accepted = (name: string) =>
    (
      stack.kube.get(API_VERSION, 'ModelServer', 'default', name)?.status as
        | {
            conditions?: {
              type: string;
              status: string;
              reason?: string;
              message?: string;
              observedGeneration?: number;
            }[];
          }
        | undefined
    )?.conditions?.find((c) => c.type === 'Accepted');

  beforeAll(async () => {
    stack = await startKubeWatcherStack('triad-pw-kube-');
    apply(modelServer('qwen'));
    apply(modelRoute('qwen-route', 'qwen'));
    apply(pod('p0', labels('prefill'), { ip: ip(1) }));
    apply(pod('d0', labels('decode'), { ip: ip(2) }));
    apply(pod('other', { app: 'unrelated' }, { ip: ip(3) }));
    watcher = await stack.startWatcher({ namespaces: ['default'] });
    endpoints = await stack.mirror(Buckets.endpoints, EndpointRecordSchema);
    servers = await stack.mirror(Buckets.modelServers, ModelServerRecordSchema);
    routes = await stack.mirror(Buckets.modelRoutes, ModelRouteRecordSchema);
  }, 120_000);

  afterAll(async () => stack?.close());

  it('publishes the initial state once synced: endpoints with roles, the ModelServer with its mode, the route', async () => {
    await waitFor(() => watcher.ready, { what: 'watcher ready' });
    await waitFor(() => endpoints.keys('default.qwen.').length === 2, { what: 'two endpoints' });
    expect(endpoints.get('default.qwen.p0')).toMatchObject({
      schemaVersion: 1,
      role: 'prefill',
      group: 'g1',
      ip: ip(1),
      port: 8000,
      engine: 'vLLM',
      ready: true,
    });
    expect(endpoints.get('default.qwen.d0')).toMatchObject({ role: 'decode', group: 'g1' });
    expect(servers.get('default.qwen')).toMatchObject({ schemaVersion: 1, mode: 'pd', spec: { inferenceEngine: 'vLLM' } });
    expect(routes.get('default.qwen-route')).toMatchObject({ schemaVersion: 1, spec: { modelName: 'qwen-route' } });
    await waitFor(() => accepted('qwen')?.status === 'True', { what: 'Accepted=True patched' });
    expect(accepted('qwen')).toMatchObject({ reason: 'Valid', observedGeneration: 1 });
    expect(stack.kube.patches.every((p) => p.subresource === 'status' && p.contentType === 'application/merge-patch+json')).toBe(true);
  });

  it('reclassifies a pod relabelled from prefill to decode', async () => {
    apply(pod('p0', labels('decode'), { ip: ip(1) }));
    await waitFor(() => role('p0') === 'decode', { what: 'p0 is decode' });
  });

  it('deletes the record of a pod made unready, and restores it when Ready again', async () => {
    apply(pod('d0', labels('decode'), { ip: ip(2), ready: false }));
    await waitFor(() => endpoints.get('default.qwen.d0') === undefined, { what: 'd0 removed' });
    apply(pod('d0', labels('decode'), { ip: ip(2) }));
    await waitFor(() => role('d0') === 'decode', { what: 'd0 back' });
  });

  it('deletes the record of a deleted pod and adds a new pod', async () => {
    stack.kube.remove('v1', 'Pod', 'default', 'd0');
    apply(pod('p1', labels('prefill'), { ip: ip(4) }));
    await waitFor(() => endpoints.get('default.qwen.d0') === undefined && role('p1') === 'prefill', { what: 'd0 gone, p1 added' });
  });

  it('classifies pods as a cluster serves them (spec, managed fields, container statuses) and follows their readiness', async () => {
    const served = (ready: boolean) =>
      servedPod('s0', { labels: labels('decode', 'g3'), annotations: { 'triad.io/bootstrap-port': '9001' }, ip: ip(6), ready });
    apply(served(true));
    await waitFor(() => role('s0') === 'decode', { what: 's0 classified' });
    expect(endpoints.get('default.qwen.s0')).toMatchObject({ role: 'decode', group: 'g3', ip: ip(6), ready: true });
    // Readiness lives in the status the informer trims: its Ready condition still counts.
    apply(served(false));
    await waitFor(() => endpoints.get('default.qwen.s0') === undefined, { what: 's0 removed while not Ready' });
    apply(served(true));
    await waitFor(() => role('s0') === 'decode', { what: 's0 back' });
    stack.kube.remove('v1', 'Pod', 'default', 's0');
    await waitFor(() => endpoints.get('default.qwen.s0') === undefined, { what: 's0 deleted' });
  });

  it('follows a selector edit, including one that matches nothing (the pool empties)', async () => {
    apply({ ...modelServer('qwen', { matchLabels: { app: 'unrelated' }, mode: 'aggregated' }) });
    await waitFor(() => endpoints.keys('default.qwen.').join() === 'default.qwen.other', { what: 'only the unrelated pod' });
    expect(role('other')).toBe('aggregated');
    expect(servers.get('default.qwen')?.mode).toBe('aggregated');
    apply(modelServer('qwen', { matchLabels: { app: 'nobody' }, mode: 'aggregated' }));
    await waitFor(() => endpoints.keys('default.qwen.').length === 0, { what: 'pool emptied' });
    apply(modelServer('qwen'));
    await waitFor(() => endpoints.keys('default.qwen.').length === 2, { what: 'pool back' });
  });

  it('rejects an invalid ModelServer edit with Accepted=False in its status while the last valid one stays live', async () => {
    const bad = modelServer('qwen');
    (bad.spec.workloadSelector as Record<string, unknown>)['pdGroup'] = undefined;
    bad.spec.inferenceEngine = 'TGI' as never;
    apply(bad);
    await waitFor(() => accepted('qwen')?.status === 'False', { what: 'Accepted=False patched' });
    const cond = accepted('qwen');
    expect(cond?.reason).toBe('InvalidSpec');
    expect(cond?.message).toContain('spec.inferenceEngine');
    expect(cond?.message).toContain('spec.workloadSelector.pdGroup: required when pipelineMode is pd');
    expect(cond?.observedGeneration).toBe(stack.kube.get(API_VERSION, 'ModelServer', 'default', 'qwen')?.metadata.generation);
    // The old spec is still in force: KV unchanged, and a new pod is classified by it.
    expect(servers.get('default.qwen')).toMatchObject({ mode: 'pd', spec: { inferenceEngine: 'vLLM' } });
    apply(pod('p2', labels('prefill', 'g2'), { ip: ip(5) }));
    await waitFor(() => role('p2') === 'prefill', { what: 'p2 classified by the last valid spec' });
    expect(watcher.log.lines.some((l) => l['msg'] === 'rejected invalid object' && l['lastValidInForce'] === true)).toBe(true);
    const before = stack.kube.patches.length;
    apply(modelServer('qwen'));
    await waitFor(() => accepted('qwen')?.status === 'True', { what: 'Accepted=True again' });
    expect(stack.kube.patches.length).toBe(before + 1);
  });

  it('retries a status patch the API server refused', async () => {
    const failedBefore = stack.kube.patches.filter((p) => p.status === 500).length;
    stack.kube.failNext('patch', 1, 500);
    apply({ ...modelServer('qwen'), spec: { ...modelServer('qwen').spec, workloadPort: { port: 0 } } });
    await waitFor(() => accepted('qwen')?.status === 'False', { what: 'Accepted=False after a retry' });
    expect(stack.kube.patches.filter((p) => p.status === 500).length).toBe(failedBefore + 1);
    apply(modelServer('qwen'));
    await waitFor(() => accepted('qwen')?.status === 'True', { what: 'Accepted=True again' });
  });

  it('resumes after the watch dies with HTTP 500 (informer restarted) and sees what changed meanwhile', async () => {
    stack.kube.failNext('watch', 2, 500, 'api/v1/pods');
    stack.kube.closeWatches();
    apply(pod('p3', labels('decode', 'g2'), { ip: ip(6) }));
    await waitFor(() => role('p3') === 'decode', { what: 'p3 after the watch restarted' });
    expect(watcher.log.lines.some((l) => l['msg'] === 'list/watch failed; restarting')).toBe(true);
    await waitFor(() => stack.kube.openWatches('api/v1/pods') === 1, { what: 'one pod watch open again' });
  });

  it('relists after 410 Gone (compacted history) and applies a deletion it never saw as an event', async () => {
    stack.kube.bookmark();
    stack.kube.expireWatches();
    stack.kube.remove('v1', 'Pod', 'default', 'p3');
    apply(pod('p1', labels('decode'), { ip: ip(4) }));
    await waitFor(() => endpoints.get('default.qwen.p3') === undefined && role('p1') === 'decode', { what: 'state after relist' });
  });

  it('removes a deleted ModelRoute and a deleted ModelServer with all its endpoints', async () => {
    stack.kube.remove(API_VERSION, 'ModelRoute', 'default', 'qwen-route');
    stack.kube.remove(API_VERSION, 'ModelServer', 'default', 'qwen');
    await waitFor(
      () =>
        routes.get('default.qwen-route') === undefined &&
        servers.get('default.qwen') === undefined &&
        endpoints.keys('default.qwen.').length === 0,
      { what: 'all gone' },
    );
  });
});
