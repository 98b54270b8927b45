import { mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SimEngineHandle } from '@triad/engine-sim';
import { inferenceRequests, ref, startHarness, type Harness } from './support/harness';

// A ModelServer names an engine credential (`spec.engineAuth.credential`); the gateway reads it from
// <engine credentials dir>/<namespace>/<name> and sends it as Authorization on every engine leg of that server. The
// client's own credential (a Triad API key or JWT) never reaches an engine unless the server asks for pass-through.

const MODEL = 'Qwen/Qwen2.5-7B';
const CLIENT_AUTH = 'Bearer client-triad-key';

describe('per-ModelServer engine credential', () => {
  const dir = mkdtempSync(join(tmpdir(), 'triad-engine-creds-'));
  let h: Harness;
  let agg: SimEngineHandle;
  let p: SimEngineHandle;
  let d: SimEngineHandle;

  const writeCredential = (namespace: string, name: string, value: string) => {
    mkdirSync(join(dir, namespace), { recursive: true });
    // Written aside and renamed in, as the kubelet swaps a mounted Secret's files.
    writeFileSync(join(dir, namespace, `.${name}.tmp`), value);
    renameSync(join(dir, namespace, `.${name}.tmp`), join(dir, namespace, name));
  };

  beforeAll(async () => {
    writeCredential('default', 'qwen-key', 'engine-secret-1\n');
    writeCredential('other', 'their-key', 'not-for-default');
    h = await startHarness({ config: { engineCredentialsDir: dir } });
    agg = await h.startSim({ engine: 'vllm', role: 'both', model: MODEL });
    p = await h.startSim({ engine: 'vllm', role: 'prefill', model: MODEL });
    d = await h.startSim({ engine: 'vllm', role: 'decode', model: MODEL });
    const base = { model: MODEL, inferenceEngine: 'vLLM' as const, workloadPort: { port: 8000, protocol: 'http' as const } };
    const servers: Record<string, Record<string, unknown>> = {
      plain: {},
      cred: { engineAuth: { credential: 'qwen-key' } },
      missing: { engineAuth: { credential: 'nope' } },
      elsewhere: { engineAuth: { credential: 'their-key' } },
    };
    for (const [name, extra] of Object.entries(servers)) {
      await h.putServer(name, { ...base, workloadSelector: { matchLabels: { app: name } }, ...extra });
      await h.putRoute(name, { modelName: name, rules: [{ targetModels: [{ modelServerName: name, weight: 100 }] }] });
      await h.putEndpoint(name, 'a', 'aggregated', agg);
    }
    await h.putServer('cred-pd', {
      ...base,
      kvConnector: { type: 'nixl' },
      engineAuth: { passThrough: false, credential: 'qwen-key' },
      workloadSelector: { matchLabels: { app: 'pd' }, pdGroup: { groupKey: 'g', prefillLabels: { r: 'p' }, decodeLabels: { r: 'd' } } },
    });
    await h.putRoute('cred-pd', { modelName: 'cred-pd', rules: [{ targetModels: [{ modelServerName: 'cred-pd', weight: 100 }] }] });
    await h.putEndpoint('cred-pd', 'p', 'prefill', p, { group: 'g1' });
    await h.putEndpoint('cred-pd', 'd', 'decode', d, { group: 'g1' });
    h.decide = (r) =>
      r.modelServer === 'cred-pd'
        ? {
            id: r.id,
            ok: true,
            mode: 'pd',
            encoders: [],
            attempts: [{ prefill: ref('cred-pd', 'p', p), endpoint: ref('cred-pd', 'd', d) }],
          }
        : { id: r.id, ok: true, mode: 'aggregated', encoders: [], attempts: [{ endpoint: ref(r.modelServer, 'a', agg) }] };
    for (const name of [...Object.keys(servers), 'cred-pd']) await h.waitForModel(name);
  });
  afterAll(async () => {
    await h?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const chat = (model: string, stream = false) =>
    fetch(`${h.gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: CLIENT_AUTH },
      body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hello' }], max_tokens: 4, stream }),
    });
  const lastAuth = (sim: SimEngineHandle) => inferenceRequests(sim).at(-1)?.headers['authorization'];

  it("sends the named credential to the engine instead of the client's", async () => {
    const res = await chat('cred');
    expect(res.status).toBe(200);
    expect(lastAuth(agg)).toBe('Bearer engine-secret-1');
  });

  it("sends no Authorization to a server that names none (the client's stays at the gateway)", async () => {
    expect((await chat('plain')).status).toBe(200);
    expect(lastAuth(agg)).toBeUndefined();
  });

  it('sends it on every leg of a PD request, prefill and decode', async () => {
    p.clearRequests();
    d.clearRequests();
    const res = await chat('cred-pd', true);
    expect(res.status).toBe(200);
    await res.text();
    expect(inferenceRequests(p).map((r) => r.headers['authorization'])).toEqual(['Bearer engine-secret-1']);
    expect(inferenceRequests(d).map((r) => r.headers['authorization'])).toEqual(['Bearer engine-secret-1']);
  });

  it('picks up a rotated credential on the next request', async () => {
    writeCredential('default', 'qwen-key', 'engine-secret-rotated');
    expect((await chat('cred')).status).toBe(200);
    expect(lastAuth(agg)).toBe('Bearer engine-secret-rotated');
  });

  it('answers 503 naming the credential, without calling an engine, when the gateway cannot read it', async () => {
    for (const model of ['missing', 'elsewhere']) {
      const before = inferenceRequests(agg).length;
      const res = await chat(model);
      expect(res.status).toBe(503);
      const body = (await res.json()) as { error: { code: string; message: string } };
      expect(body.error.code).toBe('GATEWAY_ENGINE_CREDENTIAL_UNAVAILABLE');
      // A ModelServer reaches only its own namespace's credentials: `their-key` of namespace `other` is not found.
      expect(body.error.message).toContain(`default/${model === 'missing' ? 'nope' : 'their-key'}`);
      expect(body.error.message).not.toContain('not-for-default');
      expect(inferenceRequests(agg).length).toBe(before);
    }
  });
});
