import { randomBytes } from 'node:crypto';
import { Buckets, ExternalProviderRecordSchema, ModelRouteRecordSchema, ProviderCredentialRecordSchema, openCredential } from '@triad/bus';
import { API_VERSION } from '@triad/crd';
import { waitFor } from '@triad/testing';
import type { KubeObject } from '@triad/testing/kube';
import type { KvMirror, TestWatcher } from './support/harness';
import { startKubeWatcherStack, type KubeWatcherStack } from './support/kube-watcher';
import { credentialSecret } from './support/objects';

// ExternalModelProviders with the kube source: real client-node informers on the fake API server (providers and
// Secrets listed by Kthena's label), real NATS. The credential must reach the credentials bucket sealed, and
// appear nowhere else: not in logs, not in another bucket, not in a status.
jest.setTimeout(60_000);

const TOKEN = 'sk-live-0123456789abcdef';
const provider = (name: string, spec: Record<string, unknown>): KubeObject => ({
  apiVersion: API_VERSION,
  kind: 'ExternalModelProvider',
  metadata: { name, namespace: 'llm' },
  spec: { baseURL: 'https://api.example.com', ...spec },
});
const auth = { secretRef: { name: 'openai-key', key: 'apiKey' } };

describe('pod-watcher: ExternalModelProviders and their credentials (fake API server, real NATS)', () => {
  let stack: KubeWatcherStack;
  let watcher: TestWatcher;
  const key = randomBytes(32);
  let providers: KvMirror<typeof ExternalProviderRecordSchema>;
  let credentials: KvMirror<typeof ProviderCredentialRecordSchema>;
  let routes: KvMirror<typeof ModelRouteRecordSchema>;

  const conditions = (name: string) => {
    const status = stack.kube.get(API_VERSION, 'ExternalModelProvider', 'llm', name)?.status as
      { observedGeneration?: number; conditions?: { type: string; status: string; reason: string; message: string }[] } | undefined;
    return Object.fromEntries((status?.conditions ?? []).map((c) => [c.type, `${c.status}/${c.reason}`]));
  };

  beforeAll(async () => {
    stack = await startKubeWatcherStack('triad-pw-emp-');
    stack.kube.apply(credentialSecret('openai-key', { apiKey: `  ${TOKEN}\n` }));
    stack.kube.apply(credentialSecret('unlabelled', { apiKey: 'sk-never-read' }, { labels: {} }));
    stack.kube.apply(provider('openai', { auth, headers: { 'OpenAI-Organization': 'org-1' } }));
    stack.kube.apply(provider('anthropic', { providerType: 'Anthropic', auth: { secretRef: { name: 'unlabelled', key: 'apiKey' } } }));
    stack.kube.apply(provider('public', { model: 'free-model' }));
    stack.kube.apply({
      apiVersion: API_VERSION,
      kind: 'ModelRoute',
      metadata: { name: 'mixed', namespace: 'llm' },
      spec: {
        modelName: 'mixed',
        rules: [
          {
            targetModels: [
              { externalModelProviderName: 'openai', weight: 80 },
              { externalModelProviderName: 'missing', weight: 20 },
            ],
          },
        ],
      },
    });
    watcher = await stack.startWatcher({ namespaces: ['llm'], credentialsKeyFile: stack.credentialsKeyFile(key) });
    providers = await stack.mirror(Buckets.externalProviders, ExternalProviderRecordSchema);
    credentials = await stack.mirror(Buckets.providerCredentials, ProviderCredentialRecordSchema);
    routes = await stack.mirror(Buckets.modelRoutes, ModelRouteRecordSchema);
  }, 120_000);

  afterAll(async () => stack?.close());

  it("lists only Secrets that carry Kthena's credential label", () => {
    const secretLists = stack.kube.requests.filter((r) => r.path.endsWith('/secrets'));
    expect(secretLists.length).toBeGreaterThan(0);
    expect(
      secretLists.every((r) => r.query['labelSelector'] === 'networking.serving.volcano.sh/external-model-provider-credential=true'),
    ).toBe(true);
  });

  it('publishes each provider with its readiness, and seals the credential for the gateway', async () => {
    await waitFor(() => providers.get('llm.openai')?.ready === true && credentials.get('llm.openai'), {
      what: 'openai ready with a credential',
    });
    expect(providers.get('llm.openai')).toMatchObject({
      schemaVersion: 1,
      reason: 'Ready',
      auth: { scheme: 'Bearer', header: 'authorization' },
      spec: {
        providerType: 'OpenAI',
        baseURL: 'https://api.example.com',
        insecureSkipVerify: false,
        headers: { 'OpenAI-Organization': 'org-1' },
      },
    });
    const sealed = credentials.get('llm.openai');
    expect(sealed).toMatchObject({ provider: 'openai', scheme: 'Bearer', header: 'authorization', sealed: { alg: 'A256GCM' } });
    expect(openCredential(sealed!.sealed, key, 'llm.openai')).toEqual({ ok: true, token: TOKEN });
    expect(providers.get('llm.public')).toMatchObject({ ready: true, reason: 'Ready', spec: { model: 'free-model' } });
    expect(credentials.get('llm.public')).toBeUndefined();
    // The unlabelled Secret is invisible: its provider cannot resolve it (Kthena's CredentialNotFound).
    await waitFor(() => providers.get('llm.anthropic'), { what: 'anthropic record' });
    expect(providers.get('llm.anthropic')).toMatchObject({
      ready: false,
      reason: 'CredentialNotFound',
      auth: { scheme: 'APIKey', header: 'x-api-key' },
    });
    expect(credentials.get('llm.anthropic')).toBeUndefined();
  });

  it("writes Kthena's Ready and CredentialsResolved conditions with observedGeneration", async () => {
    await waitFor(() => conditions('openai')['Ready'] === 'True/Ready' && conditions('anthropic')['Ready'], { what: 'conditions written' });
    expect(conditions('openai')).toEqual({ CredentialsResolved: 'True/CredentialResolved', Ready: 'True/Ready' });
    expect(conditions('public')).toEqual({ CredentialsResolved: 'True/CredentialNotRequired', Ready: 'True/Ready' });
    expect(conditions('anthropic')).toEqual({ CredentialsResolved: 'False/CredentialNotFound', Ready: 'False/CredentialNotFound' });
    expect(
      (stack.kube.get(API_VERSION, 'ExternalModelProvider', 'llm', 'openai')?.status as { observedGeneration?: number }).observedGeneration,
    ).toBe(1);
  });

  it('resolves the providers a route names in its record', async () => {
    await waitFor(() => routes.get('llm.mixed')?.providers, { what: 'route record with providers' });
    expect(routes.get('llm.mixed')?.providers).toEqual([
      { name: 'missing', key: 'llm.missing', found: false, ready: false, reason: 'NotFound' },
      { name: 'openai', key: 'llm.openai', found: true, ready: true, reason: 'Ready' },
    ]);
  });

  it('follows the Secret: a lost key, a removed label, a rotated value', async () => {
    const routeReason = () => routes.get('llm.mixed')?.providers?.[1]?.reason;
    stack.kube.apply(credentialSecret('openai-key', { other: 'x' }));
    await waitFor(() => providers.get('llm.openai')?.reason === 'CredentialKeyNotFound' && credentials.get('llm.openai') === undefined, {
      what: 'key lost',
    });
    await waitFor(() => conditions('openai')['CredentialsResolved'] === 'False/CredentialKeyNotFound', { what: 'status follows' });
    await waitFor(() => routeReason() === 'CredentialKeyNotFound' && routes.get('llm.mixed')?.providers?.[1]?.ready === false, {
      what: 'route record follows',
    });
    // Not ready either way: the route record still follows the reason.
    stack.kube.apply(credentialSecret('openai-key', { other: 'x' }, { labels: {} }));
    await waitFor(() => providers.get('llm.openai')?.reason === 'CredentialNotFound' && routeReason() === 'CredentialNotFound', {
      what: 'label removed',
    });
    stack.kube.apply(credentialSecret('openai-key', { apiKey: 'sk-rotated-9999' }));
    await waitFor(() => credentials.get('llm.openai') && routeReason() === 'Ready', { what: 'credential back' });
    expect(openCredential(credentials.get('llm.openai')!.sealed, key, 'llm.openai')).toEqual({ ok: true, token: 'sk-rotated-9999' });
    stack.kube.apply(credentialSecret('openai-key', { apiKey: `  ${TOKEN}\n` }));
    const opened = () => {
      const c = credentials.get('llm.openai');
      return c && openCredential(c.sealed, key, 'llm.openai');
    };
    await waitFor(
      () => {
        const o = opened();
        return o?.ok === true && o.token === TOKEN;
      },
      { what: 'the first value back' },
    );
  });

  it('keeps the last valid spec in force when an edit is invalid, and says so in Ready', async () => {
    stack.kube.apply(provider('openai', { baseURL: 'http://insecure.example.com', auth }));
    await waitFor(() => conditions('openai')['Ready'] === 'False/ConfigurationInvalid', { what: 'ConfigurationInvalid' });
    const status = stack.kube.get(API_VERSION, 'ExternalModelProvider', 'llm', 'openai')?.status as {
      observedGeneration: number;
      conditions: { type: string; message: string }[];
    };
    expect(status.conditions.find((c) => c.type === 'Ready')?.message).toBe(
      'spec.baseURL: must start with https://; the last valid version stays in force',
    );
    expect(status.observedGeneration).toBe(2);
    expect(providers.get('llm.openai')).toMatchObject({ ready: true, spec: { baseURL: 'https://api.example.com' } });
    stack.kube.apply(provider('openai', { auth, headers: { 'OpenAI-Organization': 'org-1' } }));
    await waitFor(() => conditions('openai')['Ready'] === 'True/Ready', { what: 'valid again' });
  });

  it('deletes the records of a deleted provider', async () => {
    stack.kube.remove(API_VERSION, 'ExternalModelProvider', 'llm', 'openai');
    await waitFor(() => providers.get('llm.openai') === undefined && credentials.get('llm.openai') === undefined, { what: 'records gone' });
    await waitFor(() => routes.get('llm.mixed')?.providers?.[1]?.found === false, { what: 'route sees it gone' });
  });

  it('never put a credential in a log line, another bucket, a status or a span-free place it could leak from', async () => {
    const everything = JSON.stringify({
      logs: watcher.log.lines,
      providers: [...providers.history.values()],
      routes: [...routes.values.values()],
      patches: stack.kube.patches,
      statuses: stack.kube.list(API_VERSION, 'ExternalModelProvider', 'llm').map((o) => o.status),
    });
    for (const value of [TOKEN, 'sk-rotated-9999', 'sk-never-read']) expect(everything).not.toContain(value);
    expect(JSON.stringify([...credentials.history.values()])).not.toContain(TOKEN);
  });
});
