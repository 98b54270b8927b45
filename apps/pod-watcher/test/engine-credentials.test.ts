import { randomBytes } from 'node:crypto';
import { Buckets, EngineCredentialRecordSchema, ModelServerRecordSchema, engineCredentialAad, openCredential } from '@triad/bus';
import { API_VERSION } from '@triad/crd';
import { waitFor } from '@triad/testing';
import type { KubeObject } from '@triad/testing/kube';
import type { KvMirror, TestWatcher } from './support/harness';
import { startKubeWatcherStack, type KubeWatcherStack } from './support/kube-watcher';
import { credentialSecret, modelServer } from './support/objects';

// ModelServer `engineAuth.secretRef` with the kube source: real client-node informers on the fake API server (the
// same labelled Secrets providers read), real NATS. The value must reach triad_v1_engine_credentials sealed for the
// gateways, the ModelServer must say how its Secret stands, and the value must appear nowhere else.
jest.setTimeout(60_000);

const TOKEN = 'engine-token-0123456789abcdef';
const ROTATED = 'engine-token-rotated-4242';

const server = (name: string, engineAuth?: Record<string, unknown>, namespace = 'llm') => {
  const ms = modelServer(name, { namespace, mode: 'aggregated' });
  return { ...ms, spec: { ...ms.spec, ...(engineAuth ? { engineAuth } : {}) } } as KubeObject;
};
const ref = (name: string, key = 'token') => ({ secretRef: { name, key } });

describe('pod-watcher: ModelServer engine credentials from Secrets (fake API server, real NATS)', () => {
  let stack: KubeWatcherStack;
  let watcher: TestWatcher;
  const key = randomBytes(32);
  let creds: KvMirror<typeof EngineCredentialRecordSchema>;
  let servers: KvMirror<typeof ModelServerRecordSchema>;

  type Cond = { type: string; status: string; reason: string; message: string; observedGeneration?: number };
  const conditions = (name: string): Record<string, Cond> => {
    const status = stack.kube.get(API_VERSION, 'ModelServer', 'llm', name)?.status as { conditions?: Cond[] } | undefined;
    return Object.fromEntries((status?.conditions ?? []).map((c) => [c.type, c]));
  };
  const cond = (name: string) => {
    const c = conditions(name)['EngineCredentialResolved'];
    return c && `${c.status}/${c.reason}`;
  };
  const opened = (name: string) => {
    const r = creds.get(`llm.${name}`);
    return r?.sealed && openCredential(r.sealed, key, engineCredentialAad(`llm.${name}`));
  };
  const tokenOf = (name: string) => {
    const o = opened(name);
    return o && o.ok ? o.token : undefined;
  };

  beforeAll(async () => {
    stack = await startKubeWatcherStack('triad-pw-engine-cred-');
    stack.kube.apply(credentialSecret('engine-key', { token: `  ${TOKEN}\n` }));
    stack.kube.apply(credentialSecret('unlabelled', { token: 'never-read-unlabelled' }, { labels: {} }));
    // The same name in another watched namespace: a ModelServer of llm never reads it.
    stack.kube.apply(credentialSecret('theirs', { token: 'never-read-other-namespace' }, { namespace: 'other' }));
    stack.kube.apply(server('qwen', ref('engine-key')));
    stack.kube.apply(server('no-secret', ref('absent')));
    stack.kube.apply(server('no-key', ref('engine-key', 'other-key')));
    stack.kube.apply(server('hidden', ref('unlabelled')));
    stack.kube.apply(server('elsewhere', ref('theirs')));
    stack.kube.apply(server('plain'));
    watcher = await stack.startWatcher({ namespaces: ['llm', 'other'], credentialsKeyFile: stack.credentialsKeyFile(key) });
    creds = await stack.mirror(Buckets.engineCredentials, EngineCredentialRecordSchema);
    servers = await stack.mirror(Buckets.modelServers, ModelServerRecordSchema);
  }, 120_000);

  afterAll(async () => stack?.close());

  it('seals the Secret value (trimmed) for the gateways under the engine AAD, and says so in the ModelServer status', async () => {
    await waitFor(() => tokenOf('qwen') === TOKEN, { what: 'sealed engine credential' });
    expect(creds.get('llm.qwen')).toMatchObject({
      schemaVersion: 1,
      namespace: 'llm',
      server: 'qwen',
      secretRef: { name: 'engine-key', key: 'token' },
      resolved: true,
      reason: 'CredentialResolved',
      sealed: { alg: 'A256GCM' },
    });
    // The AAD binds it to this bucket: under the bare KV key (a provider credential's AAD) it does not open.
    expect(openCredential(creds.get('llm.qwen')!.sealed!, key, 'llm.qwen').ok).toBe(false);
    await waitFor(() => cond('qwen') === 'True/CredentialResolved', { what: 'EngineCredentialResolved=True' });
    // Validation's Accepted condition is kept beside it (both are written together).
    await waitFor(() => conditions('qwen')['Accepted']?.status === 'True', { what: 'Accepted kept' });
    expect(conditions('qwen')['EngineCredentialResolved']?.observedGeneration).toBe(
      stack.kube.get(API_VERSION, 'ModelServer', 'llm', 'qwen')?.metadata.generation,
    );
    // A ModelServer without a secretRef gets neither a record nor the condition.
    await waitFor(() => servers.get('llm.plain'), { what: 'plain server record' });
    expect(creds.get('llm.plain')).toBeUndefined();
    expect(cond('plain')).toBeUndefined();
  });

  it.each([
    ['no-secret', 'CredentialNotFound', 'Secret llm/absent is not found or does not have label'],
    ['no-key', 'CredentialKeyNotFound', 'key other-key of Secret llm/engine-key is missing or empty'],
    ['hidden', 'CredentialNotFound', 'Secret llm/unlabelled is not found or does not have label'],
    ['elsewhere', 'CredentialNotFound', 'Secret llm/theirs is not found'],
  ])('%s: publishes the reason without a value, and the condition False/%s', async (name, reason, message) => {
    await waitFor(() => creds.get(`llm.${name}`) && cond(name) === `False/${reason}`, { what: `${name} ${reason}` });
    const record = creds.get(`llm.${name}`)!;
    expect(record).toMatchObject({ resolved: false, reason });
    expect(record.message).toContain(message);
    expect(record.sealed).toBeUndefined();
    expect(conditions(name)['EngineCredentialResolved']?.message).toBe(record.message);
  });

  it('follows the Secret: a rotated value, a lost key, deletion, re-creation', async () => {
    await waitFor(() => tokenOf('qwen') === TOKEN, { what: 'first value' });
    stack.kube.apply(credentialSecret('engine-key', { token: ROTATED }));
    await waitFor(() => tokenOf('qwen') === ROTATED, { what: 'rotated value sealed' });
    stack.kube.apply(credentialSecret('engine-key', { other: 'x' }));
    await waitFor(() => creds.get('llm.qwen')?.reason === 'CredentialKeyNotFound' && cond('qwen') === 'False/CredentialKeyNotFound', {
      what: 'key lost',
    });
    expect(creds.get('llm.qwen')?.sealed).toBeUndefined();
    stack.kube.remove('v1', 'Secret', 'llm', 'engine-key');
    await waitFor(() => creds.get('llm.qwen')?.reason === 'CredentialNotFound' && cond('qwen') === 'False/CredentialNotFound', {
      what: 'Secret deleted',
    });
    stack.kube.apply(credentialSecret('engine-key', { token: TOKEN }));
    await waitFor(() => tokenOf('qwen') === TOKEN && cond('qwen') === 'True/CredentialResolved', { what: 'Secret back' });
  });

  it('keeps the last valid spec (and its credential) when an edit is invalid', async () => {
    stack.kube.apply(server('qwen', { ...ref('engine-key'), passThrough: true }));
    await waitFor(() => conditions('qwen')['Accepted']?.status === 'False', { what: 'Accepted=False' });
    expect(conditions('qwen')['Accepted']?.message).toContain('passThrough and secretRef both set Authorization');
    expect(tokenOf('qwen')).toBe(TOKEN);
    expect(cond('qwen')).toBe('True/CredentialResolved');
    stack.kube.apply(server('qwen', ref('engine-key')));
    await waitFor(() => conditions('qwen')['Accepted']?.status === 'True', { what: 'valid again' });
  });

  it('drops the record, and clears the condition, when the ModelServer stops naming a Secret; drops it when the server goes', async () => {
    stack.kube.apply(server('no-key'));
    await waitFor(() => creds.get('llm.no-key') === undefined && cond('no-key') === 'True/CredentialNotRequired', {
      what: 'secretRef removed',
    });
    stack.kube.remove(API_VERSION, 'ModelServer', 'llm', 'no-secret');
    await waitFor(() => creds.get('llm.no-secret') === undefined, { what: 'record of a deleted server gone' });
  });

  it('never put a value in a log line, a status, another bucket, or a record unsealed', () => {
    const everything = JSON.stringify({
      logs: watcher.log.lines,
      patches: stack.kube.patches,
      statuses: stack.kube.list(API_VERSION, 'ModelServer', 'llm').map((o) => o.status),
      servers: [...servers.history.values()],
      creds: [...creds.history.values()],
    });
    for (const value of [TOKEN, ROTATED, 'never-read-unlabelled', 'never-read-other-namespace']) expect(everything).not.toContain(value);
  });
});
