import * as k8s from '@kubernetes/client-node';
import { waitFor } from '../wait-for';
import { startFakeKubeServer, type FakeKubeServer, type KubeObject } from './index';

const GROUP = 'example.com';
const VERSION = 'v1';
const pod = (name: string, labels: Record<string, string> = {}): KubeObject => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, namespace: 'default', labels },
  status: { phase: 'Running' },
});
const widget = (name: string, size: number): KubeObject => ({
  apiVersion: `${GROUP}/${VERSION}`,
  kind: 'Widget',
  metadata: { name, namespace: 'default' },
  spec: { size },
});

describe('fake Kubernetes API server', () => {
  let server: FakeKubeServer;
  let kc: k8s.KubeConfig;
  const informers: k8s.Informer<k8s.KubernetesObject>[] = [];

  beforeAll(async () => {
    server = await startFakeKubeServer();
    kc = new k8s.KubeConfig();
    kc.loadFromOptions(server.kubeConfigOptions());
  });
  afterAll(async () => {
    for (const inf of informers) await inf.stop();
    await server?.close();
  });

  function podInformer() {
    const core = kc.makeApiClient(k8s.CoreV1Api);
    const inf = k8s.makeInformer(kc, '/api/v1/namespaces/default/pods', () => core.listNamespacedPod({ namespace: 'default' }));
    informers.push(inf);
    const seen: string[] = [];
    inf.on('add', (o) => seen.push(`add ${o.metadata?.name}`));
    inf.on('update', (o) => seen.push(`update ${o.metadata?.name} ${JSON.stringify(o.metadata?.labels ?? {})}`));
    inf.on('delete', (o) => seen.push(`delete ${o.metadata?.name}`));
    return { inf, seen };
  }

  it('lists and watches pods: add, update and delete reach a client-node informer', async () => {
    server.apply(pod('a', { role: 'prefill' }));
    const { inf, seen } = podInformer();
    await inf.start();
    expect(seen).toEqual(['add a']);
    server.apply(pod('a', { role: 'decode' }));
    server.apply(pod('b'));
    server.remove('v1', 'Pod', 'default', 'b');
    await waitFor(() => seen.length === 4, { what: 'watch events' });
    expect(seen.slice(1)).toEqual(['update a {"role":"decode"}', 'add b', 'delete b']);
    const watch = server.requests.filter((r) => r.verb === 'watch').at(-1);
    expect(watch?.query['resourceVersion']).toBeDefined();
    await inf.stop();
  });

  it('resumes from the last resourceVersion after a clean close and a bookmark, without relisting', async () => {
    const { inf, seen } = podInformer();
    await inf.start();
    const listsBefore = server.requests.filter((r) => r.verb === 'list').length;
    server.bookmark();
    const bookmarkRv = server.resourceVersion();
    server.closeWatches();
    server.apply(pod('c'));
    await waitFor(() => seen.includes('add c'), { what: 'add after reconnect' });
    expect(server.requests.filter((r) => r.verb === 'list').length).toBe(listsBefore);
    expect(server.requests.filter((r) => r.verb === 'watch').at(-1)?.query['resourceVersion']).toBe(bookmarkRv);
    await inf.stop();
  });

  it('makes the client relist after 410 Gone and reports deletions it missed', async () => {
    const { inf, seen } = podInformer();
    await inf.start();
    const listsBefore = server.requests.filter((r) => r.verb === 'list').length;
    server.expireWatches();
    // While the client relists, a pod it knew disappears: the relist must turn that into a delete.
    server.remove('v1', 'Pod', 'default', 'c');
    await waitFor(() => seen.includes('delete c'), { what: 'delete seen through the relist' });
    expect(server.requests.filter((r) => r.verb === 'list').length).toBeGreaterThan(listsBefore);
    // The relist is followed by a new watch: stopping before it opened lets the informer open it anyway, and
    // that stray watch would take the failure the next test injects.
    const relist = server.requests.findLastIndex((r) => r.verb === 'list');
    await waitFor(() => server.requests.slice(relist + 1).some((r) => r.verb === 'watch') && server.openWatches('api/v1/pods') > 0, {
      what: 'watch reopened after the relist',
    });
    await inf.stop();
    await waitFor(() => server.openWatches('api/v1/pods') === 0, { what: 'watch closed by stop()' });
  });

  it('fails watches on request with an HTTP status; the informer reports the error and can be restarted', async () => {
    const { inf, seen } = podInformer();
    const errors: unknown[] = [];
    let stopping = false;
    // stop() aborts the watch, which the informer also reports as an error: only restart while running.
    inf.on('error', (err) => {
      errors.push(err);
      if (!stopping) setImmediate(() => void inf.start());
    });
    server.failNext('watch', 1, 500);
    try {
      await inf.start();
      await waitFor(() => errors.length === 1 && server.openWatches('api/v1/pods') > 0, { what: 'restart after 500' });
      server.apply(pod('d'));
      await waitFor(() => seen.includes('add d'));
    } finally {
      // Also when the test fails: otherwise afterAll's stop() is reported as an error and restarts it forever.
      stopping = true;
      await inf.stop();
    }
  });

  it('serves custom resources and records status patches (merge and JSON patch)', async () => {
    server.apply(widget('w1', 1));
    const custom = kc.makeApiClient(k8s.CustomObjectsApi);
    const list = (await custom.listNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: 'default',
      plural: 'widgets',
    })) as { items: KubeObject[] };
    expect(list.items.map((o) => o.metadata.name)).toEqual(['w1']);
    await custom.patchNamespacedCustomObjectStatus(
      {
        group: GROUP,
        version: VERSION,
        namespace: 'default',
        plural: 'widgets',
        name: 'w1',
        body: { status: { conditions: [{ type: 'Accepted', status: 'True' }] } },
      },
      k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
    );
    await custom.patchNamespacedCustomObjectStatus({
      group: GROUP,
      version: VERSION,
      namespace: 'default',
      plural: 'widgets',
      name: 'w1',
      body: [{ op: 'add', path: '/status/observed', value: 7 }],
    });
    expect(server.get(`${GROUP}/${VERSION}`, 'Widget', 'default', 'w1')).toMatchObject({
      spec: { size: 1 },
      status: { conditions: [{ type: 'Accepted', status: 'True' }], observed: 7 },
      metadata: { generation: 1 },
    });
    expect(server.patches.map((p) => [p.subresource, p.contentType, p.status])).toEqual([
      ['status', 'application/merge-patch+json', 200],
      ['status', 'application/json-patch+json', 200],
    ]);
    // A spec change bumps the generation and keeps the status (status subresource semantics).
    server.apply(widget('w1', 2));
    expect(server.get(`${GROUP}/${VERSION}`, 'Widget', 'default', 'w1')).toMatchObject({
      metadata: { generation: 2 },
      status: { observed: 7 },
    });
  });

  it('answers a patch of a missing object with 404 and an injected failure with its status', async () => {
    const custom = kc.makeApiClient(k8s.CustomObjectsApi);
    const patch = (name: string) =>
      custom.patchNamespacedCustomObjectStatus(
        { group: GROUP, version: VERSION, namespace: 'default', plural: 'widgets', name, body: { status: {} } },
        k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
      );
    await expect(patch('nope')).rejects.toMatchObject({ code: 404 });
    server.failNext('patch', 1, 503);
    await expect(patch('w1')).rejects.toMatchObject({ code: 503 });
    await expect(patch('w1')).resolves.toBeDefined();
  });

  it('a label-selector watch sees an object entering its selection as ADDED and leaving it as DELETED', async () => {
    const core = kc.makeApiClient(k8s.CoreV1Api);
    const inf = k8s.makeInformer(
      kc,
      '/api/v1/namespaces/default/pods',
      () => core.listNamespacedPod({ namespace: 'default', labelSelector: 'tier=gold' }),
      'tier=gold',
    );
    informers.push(inf);
    const seen: string[] = [];
    inf.on('add', (o) => seen.push(`add ${o.metadata?.name}`));
    inf.on('update', (o) => seen.push(`update ${o.metadata?.name}`));
    inf.on('delete', (o) => seen.push(`delete ${o.metadata?.name}`));
    await inf.start();
    server.apply(pod('sel', { tier: 'silver' }));
    server.apply(pod('sel', { tier: 'gold' }));
    server.apply(pod('sel', { tier: 'gold', extra: 'x' }));
    server.apply(pod('sel', { tier: 'silver' }));
    await waitFor(() => seen.length === 3, { what: 'selector transitions' });
    expect(seen).toEqual(['add sel', 'update sel', 'delete sel']);
    await inf.stop();
  });

  it('prunes status writes of collections whose CRD declares an empty status', async () => {
    const pruning = await startFakeKubeServer({ prunedStatus: [`apis/${GROUP}/${VERSION}/widgets`] });
    try {
      pruning.apply(widget('w', 1));
      const res = await fetch(`${pruning.url}/apis/${GROUP}/${VERSION}/namespaces/default/widgets/w/status`, {
        method: 'PATCH',
        headers: { 'content-type': 'application/merge-patch+json' },
        body: JSON.stringify({ status: { conditions: [{ type: 'Accepted' }] } }),
      });
      expect(res.status).toBe(200);
      expect(pruning.get(`${GROUP}/${VERSION}`, 'Widget', 'default', 'w')?.status).toEqual({});
    } finally {
      await pruning.close();
    }
  });
});
