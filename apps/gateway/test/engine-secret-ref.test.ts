import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  Buckets,
  EngineCredentialRecordSchema,
  engineCredentialAad,
  objectKey,
  sealCredential,
  type EngineCredentialRecord,
} from '@triad/bus';
import type { SimEngineHandle } from '@triad/engine-sim';
import { waitFor } from '@triad/testing';
import { NS, inferenceRequests, ref, startHarness, type Harness } from './support/harness';

// A ModelServer names a Secret of its namespace (`spec.engineAuth.secretRef`); the pod-watcher seals its value into
// triad_v1_engine_credentials (records written here as it writes them), and the gateway sends it as
// `Authorization: Bearer <value>` on every engine leg. The engine-sims check it as vLLM's --api-key does.

const MODEL = 'Qwen/Qwen2.5-7B';
const TOKEN = `engine-${randomBytes(8).toString('hex')}`;
const ROTATED = `engine-rotated-${randomBytes(8).toString('hex')}`;
const CLIENT_AUTH = 'Bearer client-triad-key';
const SECRET = { name: 'engine-key', key: 'token' };

describe('per-ModelServer engine credential from a Secret (secretRef)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'triad-engine-secret-'));
  const credentialsKey = randomBytes(32);
  let h: Harness;
  let agg: SimEngineHandle;
  let p: SimEngineHandle;
  let d: SimEngineHandle;

  /** Writes the record the pod-watcher writes: the value sealed when it resolves, else the reason. */
  async function putCredential(server: string, outcome: { token: string } | { reason: string; message: string }, key = credentialsKey) {
    const kv = await h.bus.kv(Buckets.engineCredentials, EngineCredentialRecordSchema);
    const k = objectKey(NS, server);
    const base = { schemaVersion: 1 as const, namespace: NS, server, secretRef: SECRET };
    const record: EngineCredentialRecord =
      'token' in outcome
        ? {
            ...base,
            resolved: true,
            reason: 'CredentialResolved',
            message: 'key token of Secret engine-key is in use',
            sealed: sealCredential(outcome.token, key, engineCredentialAad(k)),
          }
        : { ...base, resolved: false, ...outcome };
    await kv.put(k, record);
  }
  async function deleteCredential(server: string) {
    const kv = await h.bus.kv(Buckets.engineCredentials, EngineCredentialRecordSchema);
    await kv.delete(objectKey(NS, server));
  }

  const chat = (model: string, stream = false) =>
    fetch(`${h.gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: CLIENT_AUTH },
      body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hello' }], max_tokens: 4, stream }),
    });
  const lastAuth = (sim: SimEngineHandle) => inferenceRequests(sim).at(-1)?.headers['authorization'];
  const errorOf = async (res: Response) => ((await res.json()) as { error: { code: string; message: string } }).error;

  beforeAll(async () => {
    const keyFile = join(dir, 'credentials.key');
    writeFileSync(keyFile, credentialsKey.toString('base64'));
    h = await startHarness({ config: { credentialsKeyFile: keyFile } });
    // The engines check the key as vLLM's --api-key does: a leg without `Bearer TOKEN` is refused with 401.
    agg = await h.startSim({ engine: 'vllm', role: 'both', model: MODEL, apiKey: TOKEN });
    p = await h.startSim({ engine: 'vllm', role: 'prefill', model: MODEL, apiKey: TOKEN });
    d = await h.startSim({ engine: 'vllm', role: 'decode', model: MODEL, apiKey: TOKEN });
    const base = { model: MODEL, inferenceEngine: 'vLLM' as const, workloadPort: { port: 8000, protocol: 'http' as const } };
    for (const name of ['secret', 'not-found', 'unpublished', 'other-key', 'plain']) {
      await h.putServer(name, {
        ...base,
        workloadSelector: { matchLabels: { app: name } },
        ...(name === 'plain' ? {} : { engineAuth: { passThrough: false, secretRef: SECRET } }),
      });
      await h.putRoute(name, { modelName: name, rules: [{ targetModels: [{ modelServerName: name, weight: 100 }] }] });
      await h.putEndpoint(name, 'a', 'aggregated', agg);
    }
    await h.putServer('secret-pd', {
      ...base,
      kvConnector: { type: 'nixl' },
      engineAuth: { passThrough: false, secretRef: SECRET },
      workloadSelector: { matchLabels: { app: 'pd' }, pdGroup: { groupKey: 'g', prefillLabels: { r: 'p' }, decodeLabels: { r: 'd' } } },
    });
    await h.putRoute('secret-pd', { modelName: 'secret-pd', rules: [{ targetModels: [{ modelServerName: 'secret-pd', weight: 100 }] }] });
    await h.putEndpoint('secret-pd', 'p', 'prefill', p, { group: 'g1' });
    await h.putEndpoint('secret-pd', 'd', 'decode', d, { group: 'g1' });
    h.decide = (r) =>
      r.modelServer === 'secret-pd'
        ? {
            id: r.id,
            ok: true,
            mode: 'pd',
            encoders: [],
            attempts: [{ prefill: ref('secret-pd', 'p', p), endpoint: ref('secret-pd', 'd', d) }],
          }
        : { id: r.id, ok: true, mode: 'aggregated', encoders: [], attempts: [{ endpoint: ref(r.modelServer, 'a', agg) }] };
    await putCredential('secret', { token: `${TOKEN}` });
    await putCredential('secret-pd', { token: TOKEN });
    await putCredential('other-key', { token: TOKEN }, randomBytes(32));
    await putCredential('not-found', {
      reason: 'CredentialNotFound',
      message: `Secret ${NS}/engine-key is not found or does not have label networking.serving.volcano.sh/external-model-provider-credential=true`,
    });
    for (const name of ['secret', 'not-found', 'unpublished', 'other-key', 'plain', 'secret-pd']) await h.waitForModel(name);
    // The gateway has seen the credential once the engine accepts a request.
    await waitFor(async () => (await chat('secret')).status === 200, { what: 'the credential reaches the gateway' });
  });
  afterAll(async () => {
    await h?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("sends the Secret's value to the engine instead of the client's credential, and the engine accepts it", async () => {
    const before = agg.counters()['unauthorized'];
    const res = await chat('secret');
    expect(res.status).toBe(200);
    expect(lastAuth(agg)).toBe(`Bearer ${TOKEN}`);
    expect(agg.counters()['unauthorized']).toBe(before);
  });

  it('sends it on every leg of a PD request, prefill and decode', async () => {
    await waitFor(async () => (await chat('secret-pd')).status === 200, { what: 'PD credential published' });
    p.clearRequests();
    d.clearRequests();
    const res = await chat('secret-pd', true);
    expect(res.status).toBe(200);
    expect(await res.text()).toContain('[DONE]');
    expect(inferenceRequests(p).map((r) => r.headers['authorization'])).toEqual([`Bearer ${TOKEN}`]);
    expect(inferenceRequests(d).map((r) => r.headers['authorization'])).toEqual([`Bearer ${TOKEN}`]);
  });

  it("sends nothing to a server without engineAuth (the engine's own check refuses it)", async () => {
    const res = await chat('plain');
    expect(lastAuth(agg)).toBeUndefined();
    expect(res.status).toBe(401);
  });

  it('picks up a rotated value: the next requests carry it', async () => {
    await putCredential('secret', { token: ROTATED });
    await waitFor(
      async () => {
        await chat('secret');
        return lastAuth(agg) === `Bearer ${ROTATED}`;
      },
      { what: 'the rotated value on the engine leg' },
    );
    // The engine still expects the old key: it refuses, as a real engine would until it is rotated too.
    expect((await chat('secret')).status).toBe(401);
    await putCredential('secret', { token: TOKEN });
    await waitFor(async () => (await chat('secret')).status === 200, { what: 'the first value back' });
    expect(lastAuth(agg)).toBe(`Bearer ${TOKEN}`);
  });

  it('answers 503 naming the Secret and the reason, without calling an engine, when the Secret or key is missing', async () => {
    const before = inferenceRequests(agg).length;
    const res = await chat('not-found');
    expect(res.status).toBe(503);
    const error = await errorOf(res);
    expect(error.code).toBe('GATEWAY_ENGINE_CREDENTIAL_UNAVAILABLE');
    expect(error.message).toBe(
      `the engine credential of model server ${NS}/not-found (key token of Secret ${NS}/engine-key) is not available to the gateway: ` +
        `CredentialNotFound: Secret ${NS}/engine-key is not found or does not have label ` +
        'networking.serving.volcano.sh/external-model-provider-credential=true',
    );
    expect(inferenceRequests(agg).length).toBe(before);
  });

  it('answers 503 when nothing is published for the server, or the value was sealed for another key', async () => {
    const before = inferenceRequests(agg).length;
    const unpublished = await chat('unpublished');
    expect(unpublished.status).toBe(503);
    expect((await errorOf(unpublished)).message).toContain('not published by the pod-watcher yet');
    const otherKey = await chat('other-key');
    expect(otherKey.status).toBe(503);
    const error = await errorOf(otherKey);
    expect(error.code).toBe('GATEWAY_ENGINE_CREDENTIAL_UNAVAILABLE');
    expect(error.message).toMatch(/sealed with key [0-9a-f]{16}, this process holds [0-9a-f]{16}/);
    expect(inferenceRequests(agg).length).toBe(before);
  });

  it('stops sending a value whose record is deleted, and sends it again once republished', async () => {
    await deleteCredential('secret');
    await waitFor(async () => (await chat('secret')).status === 503, { what: 'the deletion reaches the gateway' });
    await putCredential('secret', { token: TOKEN });
    await waitFor(async () => (await chat('secret')).status === 200, { what: 'republished' });
  });

  it('never logs the value', () => {
    const logs = JSON.stringify(h.logLines);
    for (const value of [TOKEN, ROTATED]) expect(logs).not.toContain(value);
  });
});
