import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Buckets, EndpointRecordSchema } from '@triad/bus';
import { startSimEngine, type SimEngineHandle, type SimEngineOptions } from '@triad/engine-sim';
import { freePort, waitFor } from '@triad/testing';
import type { KubeObject } from '@triad/testing/kube';
import type { KvMirror, TestWatcher } from './support/harness';
import { startKubeWatcherStack, type KubeWatcherStack } from './support/kube-watcher';
import { credentialSecret, modelServer, pod } from './support/objects';

// The watcher's own engine reads (`/v1/models`, SGLang `/server_info`) against engines started with `--api-key`
// (engine-sims over real sockets): ModelServers with `engineAuth.secretRef` (kube source: real informers on the fake
// API server) and `engineAuth.credential` (the gateway's files, mounted for the watcher too), real NATS. What the
// watcher publishes from those reads (LoRA adapters, the SGLang bootstrap port and DP size) is the proof they succeed.
jest.setTimeout(60_000);

const TOKEN = 'engine-key-0123456789abcdef';
const ROTATED = 'engine-key-rotated-4242';
const FILE_TOKEN = 'file-key-55555';
const FILE_ROTATED = 'file-key-rotated-66666';

const secret = (token: string) => credentialSecret('engine-key', { token });
const server = (name: string, opts: Parameters<typeof modelServer>[1], engineAuth?: Record<string, unknown>) => {
  const ms = modelServer(name, { namespace: 'llm', matchLabels: { app: name }, ...opts });
  return { ...ms, spec: { ...ms.spec, ...(engineAuth ? { engineAuth } : {}) } } as KubeObject;
};
const ref = { secretRef: { name: 'engine-key', key: 'token' } };

describe('pod-watcher: engine reads with the engine API key (fake API server, real NATS, engine-sims with --api-key)', () => {
  let stack: KubeWatcherStack;
  let watcher: TestWatcher;
  let endpoints: KvMirror<typeof EndpointRecordSchema>;
  const ports = { vllm: 0, sgPrefill: 0, sgDecode: 0 };
  const sims: Record<'vllm' | 'sglang' | 'nokey' | 'filed', SimEngineHandle | undefined> = {
    vllm: undefined,
    sglang: undefined,
    nokey: undefined,
    filed: undefined,
  };
  const simOptions = {
    vllm: (apiKey: string, lora: string): SimEngineOptions => ({
      engine: 'vllm',
      role: 'both',
      host: '127.0.9.1',
      port: ports.vllm,
      apiKey,
      loraAdapters: [lora],
    }),
    sglang: (apiKey: string, dataParallel: number): SimEngineOptions => ({
      engine: 'sglang',
      role: 'prefill',
      host: '127.0.9.2',
      port: ports.sgPrefill,
      bootstrapPort: 0,
      apiKey,
      dataParallel,
    }),
    nokey: (): SimEngineOptions => ({
      engine: 'vllm',
      role: 'both',
      host: '127.0.9.3',
      port: ports.vllm,
      apiKey: TOKEN,
      loraAdapters: ['lora-x'],
    }),
    filed: (apiKey: string, lora: string): SimEngineOptions => ({
      engine: 'vllm',
      role: 'both',
      host: '127.0.9.4',
      port: ports.vllm,
      apiKey,
      loraAdapters: [lora],
    }),
  };
  const record = (ms: string, p: string) => endpoints.get(`llm.${ms}.${p}`);
  const sim = (name: keyof typeof sims) => sims[name] as SimEngineHandle;
  const reads = (name: keyof typeof sims, path: string) =>
    sim(name)
      .requests()
      .filter((r) => r.path === path);
  const sentWith = (name: keyof typeof sims, path: string) => reads(name, path).map((r) => r.headers['authorization']);
  const refusals = (target: string, path: string) =>
    watcher.log.lines.filter((l) => l['target'] === target && l['path'] === path && String(l['msg']).startsWith('the engine refused'));
  const credsDir = () => join(stack.dir, 'engine-credentials');
  /** A file rewritten as the kubelet does it: a new file renamed over the old one (a new inode). */
  const writeCredential = (token: string) => {
    writeFileSync(join(credsDir(), 'llm', 'engine-file.tmp'), `${token}\n`);
    renameSync(join(credsDir(), 'llm', 'engine-file.tmp'), join(credsDir(), 'llm', 'engine-file'));
  };

  beforeAll(async () => {
    stack = await startKubeWatcherStack('triad-pw-engine-auth-');
    mkdirSync(join(credsDir(), 'llm'), { recursive: true });
    writeCredential(FILE_TOKEN);
    Object.assign(ports, { vllm: await freePort(), sgPrefill: await freePort(), sgDecode: await freePort() });
    sims.vllm = await startSimEngine(simOptions.vllm(TOKEN, 'lora-a'));
    sims.sglang = await startSimEngine(simOptions.sglang(TOKEN, 2));
    sims.nokey = await startSimEngine(simOptions.nokey());
    sims.filed = await startSimEngine(simOptions.filed(FILE_TOKEN, 'lora-f'));
    stack.kube.apply(secret(TOKEN));
    stack.kube.apply(server('vllm', { mode: 'aggregated', port: ports.vllm }, ref));
    stack.kube.apply(
      server('sg', { engine: 'SGLang', mode: 'pd', ports: { prefillPort: ports.sgPrefill, decodePort: ports.sgDecode } }, ref),
    );
    stack.kube.apply(server('nokey', { mode: 'aggregated', port: ports.vllm }));
    stack.kube.apply(server('filed', { mode: 'aggregated', port: ports.vllm }, { credential: 'engine-file' }));
    stack.kube.apply(pod('v0', { app: 'vllm' }, { namespace: 'llm', ip: '127.0.9.1' }));
    stack.kube.apply(pod('p0', { app: 'sg', group: 'g1', role: 'prefill' }, { namespace: 'llm', ip: '127.0.9.2' }));
    stack.kube.apply(pod('n0', { app: 'nokey' }, { namespace: 'llm', ip: '127.0.9.3' }));
    stack.kube.apply(pod('f0', { app: 'filed' }, { namespace: 'llm', ip: '127.0.9.4' }));
    watcher = await stack.startWatcher({ namespaces: ['llm'], serverInfoIntervalMs: 200, engineCredentialsDir: credsDir() });
    endpoints = await stack.mirror(Buckets.endpoints, EndpointRecordSchema);
  }, 120_000);

  afterAll(async () => {
    await Promise.all(Object.values(sims).map((s) => s?.close()));
    await stack?.close();
  });

  it("reads vLLM's /v1/models and SGLang's /server_info with the Secret's key, and /metrics without it", async () => {
    await waitFor(() => record('vllm', 'v0')?.models.includes('lora-a'), { what: 'vLLM LoRA list from /v1/models' });
    expect(record('vllm', 'v0')).toMatchObject({ models: [sim('vllm').model, 'lora-a'], metrics: { stale: false } });
    await waitFor(() => record('sg', 'p0')?.bootstrapPort === sim('sglang').bootstrapPort, { what: 'bootstrap port from /server_info' });
    expect(sim('sglang').bootstrapPort).not.toBe(8998);
    expect(record('sg', 'p0')).toMatchObject({ dpSize: 2, models: [sim('sglang').model] });
    // Every API read carried the key; the metrics pages (which neither engine checks) carried nothing.
    expect(sentWith('vllm', '/v1/models')).toEqual(reads('vllm', '/v1/models').map(() => `Bearer ${TOKEN}`));
    expect(sentWith('sglang', '/server_info').length).toBeGreaterThan(0);
    expect(new Set([...sentWith('sglang', '/server_info'), ...sentWith('sglang', '/v1/models')])).toEqual(new Set([`Bearer ${TOKEN}`]));
    expect(new Set([...sentWith('vllm', '/metrics'), ...sentWith('sglang', '/metrics')])).toEqual(new Set([undefined]));
    expect(sim('vllm').counters()['unauthorized']).toBe(0);
    expect(sim('sglang').counters()['unauthorized']).toBe(0);
    expect(refusals('127.0.9.1:' + ports.vllm, '/v1/models')).toEqual([]);
  });

  it('reads with the file of engineAuth.credential from --engine-credentials-dir, and a rotated file on the next read', async () => {
    await waitFor(() => record('filed', 'f0')?.models.includes('lora-f'), { what: 'models read with the file key' });
    expect(new Set(sentWith('filed', '/v1/models'))).toEqual(new Set([`Bearer ${FILE_TOKEN}`]));
    writeCredential(FILE_ROTATED);
    await waitFor(() => sentWith('filed', '/v1/models').includes(`Bearer ${FILE_ROTATED}`), { what: 'rotated file sent' });
    // The engine still expects the old key: refused, logged naming the file (not the value), the list kept.
    const target = `127.0.9.4:${ports.vllm}`;
    await waitFor(() => refusals(target, '/v1/models').length === 1, { what: 'refusal logged' });
    expect(refusals(target, '/v1/models')[0]).toMatchObject({
      level: 'warn',
      status: 401,
      sent: `credential file ${credsDir()}/llm/engine-file (ModelServer llm/filed)`,
    });
    expect(record('filed', 'f0')?.models).toEqual([sim('filed').model, 'lora-f']);
    // The engine restarts with the rotated key (and another adapter): the next read is accepted.
    await sim('filed').close();
    sims.filed = await startSimEngine(simOptions.filed(FILE_ROTATED, 'lora-f2'));
    await waitFor(() => record('filed', 'f0')?.models.includes('lora-f2'), { what: 'models read with the rotated file key' });
    await waitFor(
      () => watcher.log.lines.some((l) => l['target'] === target && l['msg'] === "the engine accepts the pod-watcher's read again"),
      {
        what: 'recovery logged',
      },
    );
  });

  it('uses a rotated Secret on the next read; while the engines refuse it the last models and server info stay', async () => {
    await waitFor(() => record('sg', 'p0')?.dpSize === 2 && record('vllm', 'v0')?.models.includes('lora-a'), { what: 'first state' });
    const port = sim('sglang').bootstrapPort;
    stack.kube.apply(secret(ROTATED));
    await waitFor(() => sentWith('vllm', '/v1/models').includes(`Bearer ${ROTATED}`), { what: 'rotated key on /v1/models' });
    await waitFor(() => sentWith('sglang', '/server_info').includes(`Bearer ${ROTATED}`), { what: 'rotated key on /server_info' });
    // Refused again and again (the engines keep the old key; each read waits longer), logged once per engine and path.
    await waitFor(() => sim('vllm').counters()['unauthorized'] >= 3 && sim('sglang').counters()['unauthorized'] >= 3, {
      what: 'several refused reads',
    });
    const vllmTarget = `127.0.9.1:${ports.vllm}`;
    const sgTarget = `127.0.9.2:${ports.sgPrefill}`;
    expect(refusals(vllmTarget, '/v1/models')).toHaveLength(1);
    expect(refusals(vllmTarget, '/v1/models')[0]).toMatchObject({
      status: 401,
      sent: 'key token of Secret llm/engine-key (ModelServer llm/vllm)',
    });
    expect(refusals(sgTarget, '/server_info')).toHaveLength(1);
    expect(record('vllm', 'v0')).toMatchObject({ models: [sim('vllm').model, 'lora-a'], metrics: { stale: false } });
    expect(record('sg', 'p0')).toMatchObject({ bootstrapPort: port, dpSize: 2, metrics: { stale: false } });
    // The refused reads are counted as failed reads of their kind, as unauthorized (not as other HTTP errors).
    const ops = await (await fetch(`http://127.0.0.1:${watcher.opsPort}/metrics`)).text();
    expect(ops).toMatch(/triad_podwatcher_scrape_errors_total\{what="models",reason="unauthorized"\} [1-9]/);
    expect(ops).toMatch(/triad_podwatcher_scrape_errors_total\{what="server_info",reason="unauthorized"\} [1-9]/);
    expect(ops).toMatch(/triad_podwatcher_scrape_errors_total\{what="models",reason="http"\} 0\n/);
    // The engines restart with the rotated key: accepted, and what changed with the restart is published.
    await sim('vllm').close();
    sims.vllm = await startSimEngine(simOptions.vllm(ROTATED, 'lora-b'));
    await sim('sglang').close();
    sims.sglang = await startSimEngine(simOptions.sglang(ROTATED, 4));
    await waitFor(() => record('vllm', 'v0')?.models.includes('lora-b'), { what: 'models read with the rotated key' });
    await waitFor(() => record('sg', 'p0')?.dpSize === 4 && record('sg', 'p0')?.bootstrapPort === sim('sglang').bootstrapPort, {
      what: 'server info read with the rotated key',
    });
    expect(sim('vllm').counters()['unauthorized']).toBe(0);
  });

  it('without a credential: reads go without Authorization, are refused, logged once; the endpoint stays, with no model list', async () => {
    const target = `127.0.9.3:${ports.vllm}`;
    await waitFor(() => reads('nokey', '/v1/models').length >= 3, { what: 'several /v1/models reads' });
    expect(new Set(sentWith('nokey', '/v1/models'))).toEqual(new Set([undefined]));
    expect(refusals(target, '/v1/models')).toHaveLength(1);
    expect(refusals(target, '/v1/models')[0]).toMatchObject({
      level: 'warn',
      status: 401,
      sent: 'none: ModelServer llm/nokey sets no engineAuth',
    });
    // Metrics are not behind the key: the endpoint is live and fresh; only its adapter list is unknown (empty).
    expect(record('nokey', 'n0')).toMatchObject({ models: [], metrics: { stale: false } });
  });

  it('never put a key in a log line or an endpoint record', () => {
    const everything = JSON.stringify({ logs: watcher.log.lines, endpoints: [...endpoints.history.values()] });
    for (const value of [TOKEN, ROTATED, FILE_TOKEN, FILE_ROTATED]) expect(everything).not.toContain(value);
  });
});
