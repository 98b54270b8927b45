import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { Buckets, EndpointRecordSchema, ExternalProviderRecordSchema, ModelServerRecordSchema } from '@triad/bus';
import { startNatsServer, waitFor, type NatsServerHandle } from '@triad/testing';
import { KvMirror, startTestWatcher, type TestWatcher } from './support/harness';
import { modelServer, pod } from './support/objects';

jest.setTimeout(30_000);

const labels = (role: string) => ({ app: 'qwen', group: 'g1', role });
const ip = (n: number) => `127.0.8.${n}`;

describe('pod-watcher with the file source', () => {
  let nats: NatsServerHandle;
  let dir: string;
  let file: string;
  let starting: Promise<TestWatcher> | undefined;
  let watcher: TestWatcher;
  let endpoints: KvMirror<typeof EndpointRecordSchema>;
  let servers: KvMirror<typeof ModelServerRecordSchema>;

  /** Replaces the file the way editors and ConfigMap updates do: write elsewhere, rename over. */
  const write = (docs: readonly object[] | string) => {
    const tmp = `${file}.tmp`;
    writeFileSync(tmp, typeof docs === 'string' ? docs : docs.map((d) => stringify(d)).join('---\n'));
    renameSync(tmp, file);
  };
  const role = (p: string) => endpoints.get(`default.qwen.${p}`)?.role;

  beforeAll(async () => {
    nats = await startNatsServer();
    dir = mkdtempSync(join(tmpdir(), 'triad-pw-file-'));
    file = join(dir, 'cluster.yaml');
    write([modelServer('qwen'), pod('a', labels('prefill'), { ip: ip(1) }), pod('b', labels('decode'), { ip: ip(2) })]);
    starting = startTestWatcher({ nats: nats.url, source: `file:${file}` });
    watcher = await starting;
    endpoints = await KvMirror.open(nats.url, Buckets.endpoints, EndpointRecordSchema);
    servers = await KvMirror.open(nats.url, Buckets.modelServers, ModelServerRecordSchema);
  }, 60_000);

  afterAll(async () => {
    await endpoints?.close();
    await servers?.close();
    await (await starting?.catch(() => undefined))?.close();
    await nats?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('publishes the objects of the file once ready', async () => {
    await waitFor(() => watcher.ready && role('a') === 'prefill' && role('b') === 'decode', { what: 'initial state' });
    expect(servers.get('default.qwen')?.mode).toBe('pd');
  });

  it('applies edits live: a relabel, a new pod, a pod removed from the file', async () => {
    write([modelServer('qwen'), pod('a', labels('decode'), { ip: ip(1) }), pod('c', labels('prefill'), { ip: ip(3) })]);
    await waitFor(() => role('a') === 'decode' && role('c') === 'prefill' && role('b') === undefined, { what: 'edited state' });
  });

  it('keeps the last valid ModelServer when an edit makes it invalid, and says so in the log', async () => {
    const bad = modelServer('qwen', { mode: 'aggregated' });
    bad.spec.workloadPort = { port: 70000 };
    write([bad, pod('a', labels('decode'), { ip: ip(1) }), pod('c', labels('prefill'), { ip: ip(3) }), pod('d', labels('decode'), { ip: ip(4) })]);
    // The valid part of the same edit (pod d) applies; the ModelServer stays as it was (pd, port 8000).
    await waitFor(() => role('d') === 'decode', { what: 'pod d' });
    expect(servers.get('default.qwen')).toMatchObject({ mode: 'pd', spec: { workloadPort: { port: 8000 } } });
    expect(role('a')).toBe('decode');
    expect(watcher.log.lines.find((l) => l['msg'] === 'rejected invalid object')).toMatchObject({ kind: 'ModelServer', name: 'qwen', problems: expect.stringContaining('spec.workloadPort.port') });
  });

  it('refuses a file with a YAML syntax error as a whole and keeps the last state', async () => {
    const reloads = () => watcher.log.lines.filter((l) => l['msg'] === 'source file refused; keeping the last state').length;
    write('kind: Pod\nmetadata: {name: a\n');
    await waitFor(() => reloads() === 1, { what: 'refusal logged' });
    expect(endpoints.keys('default.qwen.')).toEqual(['default.qwen.a', 'default.qwen.c', 'default.qwen.d']);
  });

  it('recovers with the next good version, including a fixed ModelServer', async () => {
    write([modelServer('qwen', { mode: 'aggregated' }), pod('a', labels('decode'), { ip: ip(1) })]);
    await waitFor(() => servers.get('default.qwen')?.mode === 'aggregated' && endpoints.keys('default.qwen.').join() === 'default.qwen.a' && role('a') === 'aggregated', { what: 'aggregated state' });
    expect(watcher.inventory.invalidCounts().ModelServer).toBe(0);
  });

  it('reads ExternalModelProviders and labelled Secrets (stringData) from the file, and warns about fields the API server would drop', async () => {
    const providers = await KvMirror.open(nats.url, Buckets.externalProviders, ExternalProviderRecordSchema);
    try {
      write([
        modelServer('qwen', { mode: 'aggregated' }),
        { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'key', labels: { 'networking.serving.volcano.sh/external-model-provider-credential': 'true' } }, stringData: { apiKey: 'sk-file-1' } },
        { apiVersion: 'networking.serving.volcano.sh/v1alpha1', kind: 'ExternalModelProvider', metadata: { name: 'openai' }, spec: { baseURL: 'https://api.openai.com', auth: { secretRef: { name: 'key', key: 'apiKey' } }, heders: { x: 'y' } } },
      ]);
      await waitFor(() => providers.get('default.openai'), { what: 'provider from the file' });
      // No credentials key in this watcher: the credential resolves but is not handed on.
      expect(providers.get('default.openai')).toMatchObject({ ready: false, reason: 'CredentialNotDistributable' });
      expect(watcher.log.lines.find((l) => l['msg'] === 'object has warnings')).toMatchObject({ kind: 'ExternalModelProvider', warnings: "spec.heders: unknown field; the API server drops it (did you mean 'headers'?)" });
      expect(JSON.stringify(watcher.log.lines)).not.toContain('sk-file-1');
    } finally {
      await providers.close();
    }
  });
});
