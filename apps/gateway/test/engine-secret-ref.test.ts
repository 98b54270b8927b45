import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  Buckets,
  EngineCredentialRecordSchema,
  engineCredentialAad,
  objectKey,
  sealCredential,
  type EngineCredentialRecord,
} from '@triad/bus';
import { waitFor } from '@triad/testing';
import { lastAuth, startEngineAuthStack, type EngineAuthStack } from './support/engine-auth-stack';
import { NS, inferenceRequests } from './support/harness';

// A ModelServer names a Secret of its namespace (`spec.engineAuth.secretRef`); the pod-watcher seals its value into
// triad_v1_engine_credentials (records written here as it writes them), and the gateway sends it as
// `Authorization: Bearer <value>` on every engine leg. The engine-sims check it as vLLM's --api-key does.

const TOKEN = `engine-${randomBytes(8).toString('hex')}`;
const ROTATED = `engine-rotated-${randomBytes(8).toString('hex')}`;
const SECRET = { name: 'engine-key', key: 'token' };

describe('per-ModelServer engine credential from a Secret (secretRef)', () => {
  const credentialsKey = randomBytes(32);
  let stack: EngineAuthStack;

  /** Writes the record the pod-watcher writes: the value sealed when it resolves, else the reason. */
  async function putCredential(server: string, outcome: { token: string } | { reason: string; message: string }, key = credentialsKey) {
    const kv = await stack.h.bus.kv(Buckets.engineCredentials, EngineCredentialRecordSchema);
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
    const kv = await stack.h.bus.kv(Buckets.engineCredentials, EngineCredentialRecordSchema);
    await kv.delete(objectKey(NS, server));
  }

  const errorOf = async (res: Response) => ((await res.json()) as { error: { code: string; message: string } }).error;

  beforeAll(async () => {
    const engineAuth = { engineAuth: { passThrough: false, secretRef: SECRET } };
    stack = await startEngineAuthStack({
      dirPrefix: 'triad-engine-secret-',
      prepare: (dir) => {
        const keyFile = join(dir, 'credentials.key');
        writeFileSync(keyFile, credentialsKey.toString('base64'));
        return { credentialsKeyFile: keyFile };
      },
      // The engines check the key as vLLM's --api-key does: a leg without `Bearer TOKEN` is refused with 401.
      apiKey: TOKEN,
      servers: { secret: engineAuth, 'not-found': engineAuth, unpublished: engineAuth, 'other-key': engineAuth, plain: {} },
      pd: { name: 'secret-pd', spec: engineAuth },
    });
    await putCredential('secret', { token: `${TOKEN}` });
    await putCredential('secret-pd', { token: TOKEN });
    await putCredential('other-key', { token: TOKEN }, randomBytes(32));
    await putCredential('not-found', {
      reason: 'CredentialNotFound',
      message: `Secret ${NS}/engine-key is not found or does not have label networking.serving.volcano.sh/external-model-provider-credential=true`,
    });
    // The gateway has seen the credential once the engine accepts a request.
    await waitFor(async () => (await stack.chat('secret')).status === 200, { what: 'the credential reaches the gateway' });
  });
  afterAll(async () => stack?.close());

  it("sends the Secret's value to the engine instead of the client's credential, and the engine accepts it", async () => {
    const before = stack.agg.counters()['unauthorized'];
    const res = await stack.chat('secret');
    expect(res.status).toBe(200);
    expect(lastAuth(stack.agg)).toBe(`Bearer ${TOKEN}`);
    expect(stack.agg.counters()['unauthorized']).toBe(before);
  });

  it('sends it on every leg of a PD request, prefill and decode', async () => {
    await waitFor(async () => (await stack.chat('secret-pd')).status === 200, { what: 'PD credential published' });
    stack.p.clearRequests();
    stack.d.clearRequests();
    const res = await stack.chat('secret-pd', true);
    expect(res.status).toBe(200);
    expect(await res.text()).toContain('[DONE]');
    expect(inferenceRequests(stack.p).map((r) => r.headers['authorization'])).toEqual([`Bearer ${TOKEN}`]);
    expect(inferenceRequests(stack.d).map((r) => r.headers['authorization'])).toEqual([`Bearer ${TOKEN}`]);
  });

  it("sends nothing to a server without engineAuth (the engine's own check refuses it)", async () => {
    const res = await stack.chat('plain');
    expect(lastAuth(stack.agg)).toBeUndefined();
    expect(res.status).toBe(401);
  });

  it('picks up a rotated value: the next requests carry it', async () => {
    await putCredential('secret', { token: ROTATED });
    await waitFor(
      async () => {
        await stack.chat('secret');
        return lastAuth(stack.agg) === `Bearer ${ROTATED}`;
      },
      { what: 'the rotated value on the engine leg' },
    );
    // The engine still expects the old key: it refuses, as a real engine would until it is rotated too.
    expect((await stack.chat('secret')).status).toBe(401);
    await putCredential('secret', { token: TOKEN });
    await waitFor(async () => (await stack.chat('secret')).status === 200, { what: 'the first value back' });
    expect(lastAuth(stack.agg)).toBe(`Bearer ${TOKEN}`);
  });

  it('answers 503 naming the Secret and the reason, without calling an engine, when the Secret or key is missing', async () => {
    const before = inferenceRequests(stack.agg).length;
    const res = await stack.chat('not-found');
    expect(res.status).toBe(503);
    const error = await errorOf(res);
    expect(error.code).toBe('GATEWAY_ENGINE_CREDENTIAL_UNAVAILABLE');
    expect(error.message).toBe(
      `the engine credential of model server ${NS}/not-found (key token of Secret ${NS}/engine-key) is not available to the gateway: ` +
        `CredentialNotFound: Secret ${NS}/engine-key is not found or does not have label ` +
        'networking.serving.volcano.sh/external-model-provider-credential=true',
    );
    expect(inferenceRequests(stack.agg).length).toBe(before);
  });

  it('answers 503 when nothing is published for the server, or the value was sealed for another key', async () => {
    const before = inferenceRequests(stack.agg).length;
    const unpublished = await stack.chat('unpublished');
    expect(unpublished.status).toBe(503);
    expect((await errorOf(unpublished)).message).toContain('not published by the pod-watcher yet');
    const otherKey = await stack.chat('other-key');
    expect(otherKey.status).toBe(503);
    const error = await errorOf(otherKey);
    expect(error.code).toBe('GATEWAY_ENGINE_CREDENTIAL_UNAVAILABLE');
    expect(error.message).toMatch(/sealed with key [0-9a-f]{16}, this process holds [0-9a-f]{16}/);
    expect(inferenceRequests(stack.agg).length).toBe(before);
  });

  it('stops sending a value whose record is deleted, and sends it again once republished', async () => {
    await deleteCredential('secret');
    await waitFor(async () => (await stack.chat('secret')).status === 503, { what: 'the deletion reaches the gateway' });
    await putCredential('secret', { token: TOKEN });
    await waitFor(async () => (await stack.chat('secret')).status === 200, { what: 'republished' });
  });

  it('never logs the value', () => {
    const logs = JSON.stringify(stack.h.logLines);
    for (const value of [TOKEN, ROTATED]) expect(logs).not.toContain(value);
  });
});
