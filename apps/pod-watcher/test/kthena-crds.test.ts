import { Buckets, ExternalProviderRecordSchema, ModelServerRecordSchema } from '@triad/bus';
import { API_VERSION } from '@triad/crd';
import { waitFor } from '@triad/testing';
import type { KubeObject } from '@triad/testing/kube';
import type { KvMirror, TestWatcher } from './support/harness';
import { startKubeWatcherStack, type KubeWatcherStack } from './support/kube-watcher';
import { modelServer } from './support/objects';

// Triad next to Kthena's own CRDs (Kthena v1.0 installed first, Triad's CRDs skipped): ModelServer/ModelRoute
// status has no fields there, so the API server prunes the Accepted condition, and the ExternalModelProvider
// CRD may not exist at all. The watcher must neither hang on the missing CRD nor patch status forever.
jest.setTimeout(60_000);

const GROUP_PATH = 'apis/networking.serving.volcano.sh/v1alpha1';

describe("pod-watcher on Kthena's CRDs (pruned status, ExternalModelProvider CRD missing at first)", () => {
  let stack: KubeWatcherStack;
  let watcher: TestWatcher;
  let servers: KvMirror<typeof ModelServerRecordSchema>;
  let providers: KvMirror<typeof ExternalProviderRecordSchema>;

  const statusPatches = () =>
    stack.kube.patches.filter((p) => p.collection === `${GROUP_PATH}/modelservers` && p.subresource === 'status').length;
  const prunedWarnings = () =>
    watcher.log.lines.filter((l) => String(l['msg']).startsWith('status written earlier is not on the object')).length;

  beforeAll(async () => {
    stack = await startKubeWatcherStack('triad-pw-kthena-', {
      prunedStatus: [`${GROUP_PATH}/modelservers`, `${GROUP_PATH}/modelroutes`],
    });
    stack.kube.apply(modelServer('qwen', { mode: 'aggregated' }));
    stack.kube.failNext('list', 2, 404, `${GROUP_PATH}/externalmodelproviders`);
    watcher = await stack.startWatcher({ namespaces: ['default'] });
    servers = await stack.mirror(Buckets.modelServers, ModelServerRecordSchema);
    providers = await stack.mirror(Buckets.externalProviders, ExternalProviderRecordSchema);
  }, 120_000);

  afterAll(async () => stack?.close());

  it('becomes ready without the ExternalModelProvider CRD, and serves the ModelServer', async () => {
    await waitFor(() => watcher.ready, { what: 'ready' });
    await waitFor(() => servers.get('default.qwen'), { what: 'server record' });
    expect(watcher.log.lines.some((l) => String(l['msg']).startsWith('resource not served by the API server'))).toBe(true);
  });

  const upserts = async () =>
    (await watcher.metrics.sourceEvents.get()).values.find((v) => v.labels['kind'] === 'ModelServer' && v.labels['type'] === 'upsert')
      ?.value ?? 0;

  it('writes the Accepted condition once per version and does not loop when the API server prunes it', async () => {
    await waitFor(() => prunedWarnings() === 1, { what: 'the pruned status noticed' });
    expect(statusPatches()).toBe(1);
    expect(stack.kube.get(API_VERSION, 'ModelServer', 'default', 'qwen')?.status).toEqual({});
    // The same version again (a metadata-only change): delivered, and not written a second time.
    const seen = await upserts();
    const labelled = modelServer('qwen', { mode: 'aggregated' }) as KubeObject;
    stack.kube.apply({ ...labelled, metadata: { ...labelled.metadata, labels: { touched: 'yes' } } });
    await waitFor(async () => (await upserts()) > seen, { what: 'the metadata change delivered' });
    expect(statusPatches()).toBe(1);
    stack.kube.apply(modelServer('qwen', { mode: 'aggregated', port: 8001 }));
    await waitFor(() => prunedWarnings() === 2, { what: 'the second version written and noticed' });
    expect(statusPatches()).toBe(2);
  });

  it('picks up ExternalModelProviders once the CRD is served', async () => {
    stack.kube.apply({
      apiVersion: API_VERSION,
      kind: 'ExternalModelProvider',
      metadata: { name: 'openai', namespace: 'default' },
      spec: { baseURL: 'https://api.openai.com' },
    });
    await waitFor(() => providers.get('default.openai')?.ready === true, { what: 'provider after the CRD appeared', timeoutMs: 20_000 });
  });
});
