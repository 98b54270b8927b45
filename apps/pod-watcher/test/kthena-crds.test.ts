import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Buckets, ExternalProviderRecordSchema, ModelServerRecordSchema } from '@triad/bus';
import { API_VERSION } from '@triad/crd';
import { startNatsServer, waitFor, type NatsServerHandle } from '@triad/testing';
import { startFakeKubeServer, type FakeKubeServer, type KubeObject } from '@triad/testing/kube';
import { KvMirror, startTestWatcher, type TestWatcher } from './support/harness';
import { modelServer } from './support/objects';

// Triad next to Kthena's own CRDs (Kthena v1.0 installed first, Triad's CRDs skipped): ModelServer/ModelRoute
// status has no fields there, so the API server prunes the Accepted condition, and the ExternalModelProvider
// CRD may not exist at all. The watcher must neither hang on the missing CRD nor patch status forever.
jest.setTimeout(60_000);

const GROUP_PATH = 'apis/networking.serving.volcano.sh/v1alpha1';

describe("pod-watcher on Kthena's CRDs (pruned status, ExternalModelProvider CRD missing at first)", () => {
  let nats: NatsServerHandle;
  let kube: FakeKubeServer;
  let dir: string;
  let starting: Promise<TestWatcher> | undefined;
  let watcher: TestWatcher;
  let servers: KvMirror<typeof ModelServerRecordSchema>;
  let providers: KvMirror<typeof ExternalProviderRecordSchema>;

  const statusPatches = () =>
    kube.patches.filter((p) => p.collection === `${GROUP_PATH}/modelservers` && p.subresource === 'status').length;
  const prunedWarnings = () =>
    watcher.log.lines.filter((l) => String(l['msg']).startsWith('status written earlier is not on the object')).length;

  beforeAll(async () => {
    nats = await startNatsServer();
    kube = await startFakeKubeServer({ prunedStatus: [`${GROUP_PATH}/modelservers`, `${GROUP_PATH}/modelroutes`] });
    dir = mkdtempSync(join(tmpdir(), 'triad-pw-kthena-'));
    writeFileSync(join(dir, 'kubeconfig'), kube.kubeconfigYaml());
    kube.apply(modelServer('qwen', { mode: 'aggregated' }));
    kube.failNext('list', 2, 404, `${GROUP_PATH}/externalmodelproviders`);
    starting = startTestWatcher({ nats: nats.url, source: 'kube', kubeconfig: join(dir, 'kubeconfig'), namespaces: ['default'] });
    watcher = await starting;
    servers = await KvMirror.open(nats.url, Buckets.modelServers, ModelServerRecordSchema);
    providers = await KvMirror.open(nats.url, Buckets.externalProviders, ExternalProviderRecordSchema);
  }, 120_000);

  afterAll(async () => {
    await servers?.close();
    await providers?.close();
    await (await starting?.catch(() => undefined))?.close();
    await kube?.close();
    await nats?.close();
    rmSync(dir, { recursive: true, force: true });
  });

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
    expect(kube.get(API_VERSION, 'ModelServer', 'default', 'qwen')?.status).toEqual({});
    // The same version again (a metadata-only change): delivered, and not written a second time.
    const seen = await upserts();
    const labelled = modelServer('qwen', { mode: 'aggregated' }) as KubeObject;
    kube.apply({ ...labelled, metadata: { ...labelled.metadata, labels: { touched: 'yes' } } });
    await waitFor(async () => (await upserts()) > seen, { what: 'the metadata change delivered' });
    expect(statusPatches()).toBe(1);
    kube.apply(modelServer('qwen', { mode: 'aggregated', port: 8001 }));
    await waitFor(() => prunedWarnings() === 2, { what: 'the second version written and noticed' });
    expect(statusPatches()).toBe(2);
  });

  it('picks up ExternalModelProviders once the CRD is served', async () => {
    kube.apply({
      apiVersion: API_VERSION,
      kind: 'ExternalModelProvider',
      metadata: { name: 'openai', namespace: 'default' },
      spec: { baseURL: 'https://api.openai.com' },
    });
    await waitFor(() => providers.get('default.openai')?.ready === true, { what: 'provider after the CRD appeared', timeoutMs: 20_000 });
  });
});
