import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import {
  Buckets,
  EndpointRecordSchema,
  EngineCredentialRecordSchema,
  ExternalProviderRecordSchema,
  ModelServerRecordSchema,
} from '@triad/bus';
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
    write([
      bad,
      pod('a', labels('decode'), { ip: ip(1) }),
      pod('c', labels('prefill'), { ip: ip(3) }),
      pod('d', labels('decode'), { ip: ip(4) }),
    ]);
    // The valid part of the same edit (pod d) applies; the ModelServer stays as it was (pd, port 8000).
    await waitFor(() => role('d') === 'decode', { what: 'pod d' });
    expect(servers.get('default.qwen')).toMatchObject({ mode: 'pd', spec: { workloadPort: { port: 8000 } } });
    expect(role('a')).toBe('decode');
    expect(watcher.log.lines.find((l) => l['msg'] === 'rejected invalid object')).toMatchObject({
      kind: 'ModelServer',
      name: 'qwen',
      problems: expect.stringContaining('spec.workloadPort.port'),
    });
  });

  it('refuses a file with a YAML syntax error as a whole and keeps the last state', async () => {
    const reloads = () => watcher.log.lines.filter((l) => l['msg'] === 'source file refused; keeping the last state').length;
    write('kind: Pod\nmetadata: {name: a\n');
    await waitFor(() => reloads() === 1, { what: 'refusal logged' });
    expect(endpoints.keys('default.qwen.')).toEqual(['default.qwen.a', 'default.qwen.c', 'default.qwen.d']);
  });

  it('keeps a live pool when a later copy of its ModelServer (same name) is pasted in broken', async () => {
    const broken = modelServer('qwen', { mode: 'aggregated' });
    broken.spec.workloadSelector = { matchLabels: { app: 'nothing-matches' } };
    const refusals = () => watcher.log.lines.filter((l) => l['msg']?.toString().startsWith('object defined more than once')).length;
    write([
      modelServer('qwen'),
      broken,
      pod('a', labels('decode'), { ip: ip(1) }),
      pod('c', labels('prefill'), { ip: ip(3) }),
      pod('d', labels('decode'), { ip: ip(4) }),
      pod('e', labels('decode'), { ip: ip(5) }),
    ]);
    // The rest of the edit applies (pod e); the duplicated ModelServer keeps its last state, so no pod loses its role.
    await waitFor(() => role('e') === 'decode' && refusals() === 1, { what: 'pod e and the duplicate warning' });
    expect(servers.get('default.qwen')).toMatchObject({ mode: 'pd', spec: { workloadSelector: { matchLabels: { app: 'qwen' } } } });
    expect(endpoints.keys('default.qwen.')).toEqual(['default.qwen.a', 'default.qwen.c', 'default.qwen.d', 'default.qwen.e']);
  });

  it('refuses an emptied file and keeps every object', async () => {
    const refused = () => watcher.log.lines.filter((l) => String(l['error'] ?? '').includes('holds no ModelServer')).length;
    write('');
    await waitFor(() => refused() === 1, { what: 'empty file refused' });
    write('# nothing here yet\n---\n');
    await waitFor(() => refused() === 2, { what: 'comment-only file refused' });
    expect(endpoints.keys('default.qwen.')).toEqual(['default.qwen.a', 'default.qwen.c', 'default.qwen.d', 'default.qwen.e']);
    expect(servers.get('default.qwen')?.mode).toBe('pd');
  });

  it('does not delete what a file rewritten in place still holds once it is complete', async () => {
    const full = [
      modelServer('qwen'),
      pod('a', labels('decode'), { ip: ip(1) }),
      pod('c', labels('prefill'), { ip: ip(3) }),
      pod('d', labels('decode'), { ip: ip(4) }),
      pod('e', labels('decode'), { ip: ip(5) }),
      pod('f', labels('decode'), { ip: ip(6) }),
    ];
    const text = full.map((d) => stringify(d)).join('---\n');
    const cut = text.indexOf('---\n', text.indexOf('name: c')) + 4;
    const count = (msg: string) => watcher.log.lines.filter((l) => l['msg'] === msg).length;
    const removals = count('objects removed from the source file');
    const settling = count('source file version removes objects; waiting for the file to settle');
    // The writer truncates the file and writes its first half; the rest follows before the file settles.
    writeFileSync(file, text.slice(0, cut));
    await waitFor(() => count('source file version removes objects; waiting for the file to settle') === settling + 1, {
      what: 'half file seen',
    });
    writeFileSync(file, text);
    await waitFor(() => role('f') === 'decode', { what: 'pod f' });
    expect(endpoints.keys('default.qwen.')).toEqual([
      'default.qwen.a',
      'default.qwen.c',
      'default.qwen.d',
      'default.qwen.e',
      'default.qwen.f',
    ]);
    expect(count('objects removed from the source file')).toBe(removals);
  });

  it('never publishes a pod whose address is not an IP, and keeps its last valid address', async () => {
    const docs = (fIp: string, gIp: string) => [
      modelServer('qwen'),
      pod('a', labels('decode'), { ip: ip(1) }),
      pod('c', labels('prefill'), { ip: ip(3) }),
      pod('d', labels('decode'), { ip: ip(4) }),
      pod('e', labels('decode'), { ip: ip(5) }),
      pod('f', labels('decode'), { ip: fIp }),
      pod('g', labels('decode'), { ip: gIp }),
    ];
    write(docs('127.0.0.999', '::::'));
    await waitFor(() => watcher.log.lines.filter((l) => l['msg'] === 'rejected invalid object' && l['kind'] === 'Pod').length === 2, {
      what: 'two pods rejected',
    });
    expect(endpoints.get('default.qwen.f')?.ip).toBe(ip(6));
    expect(endpoints.get('default.qwen.g')).toBeUndefined();
    write(docs(ip(6), ip(7)));
    await waitFor(() => role('g') === 'decode', { what: 'pod g with a valid address' });
  });

  it('recovers with the next good version, including a fixed ModelServer', async () => {
    write([modelServer('qwen', { mode: 'aggregated' }), pod('a', labels('decode'), { ip: ip(1) })]);
    await waitFor(
      () =>
        servers.get('default.qwen')?.mode === 'aggregated' &&
        endpoints.keys('default.qwen.').join() === 'default.qwen.a' &&
        role('a') === 'aggregated',
      { what: 'aggregated state' },
    );
    expect(watcher.inventory.invalidCounts().ModelServer).toBe(0);
  });

  it('reads ExternalModelProviders and labelled Secrets (stringData) from the file, and warns about fields the API server would drop', async () => {
    const providers = await KvMirror.open(nats.url, Buckets.externalProviders, ExternalProviderRecordSchema);
    try {
      write([
        modelServer('qwen', { mode: 'aggregated' }),
        {
          apiVersion: 'v1',
          kind: 'Secret',
          metadata: { name: 'key', labels: { 'networking.serving.volcano.sh/external-model-provider-credential': 'true' } },
          stringData: { apiKey: 'sk-file-1' },
        },
        {
          apiVersion: 'networking.serving.volcano.sh/v1alpha1',
          kind: 'ExternalModelProvider',
          metadata: { name: 'openai' },
          spec: { baseURL: 'https://api.openai.com', auth: { secretRef: { name: 'key', key: 'apiKey' } }, heders: { x: 'y' } },
        },
      ]);
      await waitFor(() => providers.get('default.openai'), { what: 'provider from the file' });
      // No credentials key in this watcher: the credential resolves but is not handed on.
      expect(providers.get('default.openai')).toMatchObject({ ready: false, reason: 'CredentialNotDistributable' });
      expect(watcher.log.lines.find((l) => l['msg'] === 'object has warnings')).toMatchObject({
        kind: 'ExternalModelProvider',
        warnings: "spec.heders: unknown field; the API server drops it (did you mean 'headers'?)",
      });
      expect(JSON.stringify(watcher.log.lines)).not.toContain('sk-file-1');
    } finally {
      await providers.close();
    }
  });
  it("reads a ModelServer's engineAuth.secretRef Secret from the file (local runs), and follows it leaving the file", async () => {
    const creds = await KvMirror.open(nats.url, Buckets.engineCredentials, EngineCredentialRecordSchema);
    const ms = modelServer('qwen', { mode: 'aggregated' });
    const withRef = { ...ms, spec: { ...ms.spec, engineAuth: { secretRef: { name: 'engine-key', key: 'token' } } } };
    const engineSecret = {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'engine-key', labels: { 'networking.serving.volcano.sh/external-model-provider-credential': 'true' } },
      stringData: { token: 'engine-file-1' },
    };
    try {
      write([withRef, engineSecret]);
      // No credentials key in this watcher: the value resolves but is not handed on.
      await waitFor(() => creds.get('default.qwen')?.reason === 'CredentialNotDistributable', { what: 'engine credential from the file' });
      expect(creds.get('default.qwen')).toMatchObject({ resolved: false, secretRef: { name: 'engine-key', key: 'token' } });
      write([withRef]);
      await waitFor(() => creds.get('default.qwen')?.reason === 'CredentialNotFound', { what: 'Secret gone from the file' });
      expect(JSON.stringify([watcher.log.lines, [...creds.history.values()]])).not.toContain('engine-file-1');
    } finally {
      await creds.close();
    }
  });
});
