import * as k8s from '@kubernetes/client-node';
import { waitFor } from '@triad/testing';
import { servedPod, startFakeKubeServer, type FakeKubeServer } from '@triad/testing/kube';
import { trimCachedPod } from '../src/sources/kube/cached-pod';
import { listInPages } from '../src/sources/kube/kube-source';

// The kube source's list: pages of 500 as Go's reflector reads them, each page's pods trimmed before the next is
// read, behind a real client-node informer and the fake API server.
describe('kube source lists in pages, pods trimmed in the informer cache', () => {
  let server: FakeKubeServer;
  let informer: k8s.Informer<k8s.KubernetesObject> | undefined;
  const PODS = 1203;

  beforeAll(async () => {
    server = await startFakeKubeServer();
    for (let i = 0; i < PODS; i++)
      server.apply(servedPod(`pod-${String(i).padStart(4, '0')}`, { labels: { app: 'qwen' }, ip: `10.2.${i >> 8}.${i & 255}` }));
  });
  afterAll(async () => {
    await informer?.stop();
    await server?.close();
  });

  it('lists every pod in three pages, caches them trimmed, and watches from the first page resourceVersion', async () => {
    const kc = new k8s.KubeConfig();
    kc.loadFromOptions(server.kubeConfigOptions());
    const core = kc.makeApiClient(k8s.CoreV1Api);
    const pages: (number | undefined)[] = [];
    let firstVersion: string | undefined;
    const list = () =>
      listInPages(async (page) => {
        const got = (await core.listNamespacedPod({ namespace: 'default', ...page })) as k8s.KubernetesListObject<k8s.KubernetesObject>;
        pages.push(got.items.length);
        firstVersion ??= got.metadata?.resourceVersion;
        return got;
      }, trimCachedPod);
    const inf = k8s.makeInformer<k8s.KubernetesObject>(kc, '/api/v1/namespaces/default/pods', list);
    informer = inf;
    const added: string[] = [];
    inf.on('add', (o) => added.push(o.metadata?.name ?? ''));
    await inf.start();
    expect(pages).toEqual([500, 500, 203]);
    expect(added.length).toBe(PODS);
    expect(new Set(added).size).toBe(PODS);
    const lists = server.requests.filter((r) => r.verb === 'list');
    expect(lists.map((r) => r.query['limit'])).toEqual(['500', '500', '500']);
    expect(lists.map((r) => Boolean(r.query['continue']))).toEqual([false, true, true]);
    // The cache holds what Triad reads of each pod, nothing of its spec or container statuses.
    const cached = inf.list('default') as unknown as Record<string, unknown>[];
    expect(cached.length).toBe(PODS);
    for (const p of cached) {
      expect(p['spec']).toBeUndefined();
      expect(Object.keys(p['status'] as object).sort()).toEqual(['conditions', 'phase', 'podIP']);
      expect((p['metadata'] as Record<string, unknown>)['managedFields']).toBeUndefined();
    }
    // The watch starts where the first page's snapshot was: a pod added now arrives as an event.
    expect(firstVersion).toBe(server.resourceVersion());
    server.apply(servedPod('late', { labels: { app: 'qwen' }, ip: '10.3.0.1' }));
    await waitFor(() => added.includes('late'), { what: 'the pod added after the list' });
    const watch = server.requests.find((r) => r.verb === 'watch');
    expect(watch?.query['resourceVersion']).toBe(firstVersion);
  });
});
