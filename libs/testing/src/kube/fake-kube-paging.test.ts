import * as k8s from '@kubernetes/client-node';
import { startFakeKubeServer, type FakeKubeServer, type KubeObject } from './index';

const pod = (name: string): KubeObject => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, namespace: 'default' },
  status: { phase: 'Running' },
});

describe('fake Kubernetes API server: lists in pages (limit, continue)', () => {
  let server: FakeKubeServer;
  let core: k8s.CoreV1Api;

  beforeAll(async () => {
    server = await startFakeKubeServer();
    const kc = new k8s.KubeConfig();
    kc.loadFromOptions(server.kubeConfigOptions());
    core = kc.makeApiClient(k8s.CoreV1Api);
  });
  afterAll(async () => {
    await server?.close();
  });

  const names = (list: k8s.V1PodList) => list.items.map((p) => p.metadata?.name);

  it('cuts pages in name order, continuing after the last key: an object removed or added between pages shifts nothing', async () => {
    for (const n of ['e', 'a', 'd', 'b', 'c']) server.apply(pod(n));
    const first = await core.listNamespacedPod({ namespace: 'default', limit: 2 });
    expect(names(first)).toEqual(['a', 'b']);
    expect(first.metadata?._continue).toBeTruthy();
    const rv = first.metadata?.resourceVersion;
    // Between pages: one already listed goes, one not yet listed comes.
    server.remove('v1', 'Pod', 'default', 'a');
    server.apply(pod('cc'));
    const second = await core.listNamespacedPod({ namespace: 'default', limit: 2, _continue: first.metadata!._continue! });
    expect(names(second)).toEqual(['c', 'cc']);
    expect(second.metadata?.resourceVersion).toBe(rv);
    const third = await core.listNamespacedPod({ namespace: 'default', limit: 2, _continue: second.metadata!._continue! });
    expect(names(third)).toEqual(['d', 'e']);
    expect(third.metadata?._continue).toBeFalsy();
    // Without a limit, one page of everything at the current resourceVersion.
    const whole = await core.listNamespacedPod({ namespace: 'default' });
    expect(names(whole)).toEqual(['b', 'c', 'cc', 'd', 'e']);
    expect(whole.metadata?._continue).toBeFalsy();
    expect(Number(whole.metadata?.resourceVersion)).toBeGreaterThan(Number(rv));
  });

  it('answers a continue token older than the last compaction with 410 Expired, and a garbled one with 400', async () => {
    const first = await core.listNamespacedPod({ namespace: 'default', limit: 1 });
    server.apply(pod('z'));
    server.compact();
    const status = (p: Promise<unknown>) =>
      p.then(
        () => 200,
        (err: { code?: number }) => err.code,
      );
    expect(await status(core.listNamespacedPod({ namespace: 'default', limit: 1, _continue: first.metadata!._continue! }))).toBe(410);
    expect(await status(core.listNamespacedPod({ namespace: 'default', limit: 1, _continue: '%%%' }))).toBe(400);
  });
});
