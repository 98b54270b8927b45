import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { lastAuth, startEngineAuthStack, type EngineAuthStack } from './support/engine-auth-stack';
import { inferenceRequests } from './support/harness';

// A ModelServer names an engine credential (`spec.engineAuth.credential`); the gateway reads it from
// <engine credentials dir>/<namespace>/<name> and sends it as Authorization on every engine leg of that server. The
// client's own credential (a Triad API key or JWT) never reaches an engine unless the server asks for pass-through.

describe('per-ModelServer engine credential', () => {
  let stack: EngineAuthStack;

  /** Written aside and renamed in, as the kubelet swaps a mounted Secret's files. */
  const writeCredential = (dir: string, namespace: string, name: string, value: string) => {
    mkdirSync(join(dir, namespace), { recursive: true });
    writeFileSync(join(dir, namespace, `.${name}.tmp`), value);
    renameSync(join(dir, namespace, `.${name}.tmp`), join(dir, namespace, name));
  };

  beforeAll(async () => {
    stack = await startEngineAuthStack({
      dirPrefix: 'triad-engine-creds-',
      prepare: (dir) => {
        writeCredential(dir, 'default', 'qwen-key', 'engine-secret-1\n');
        writeCredential(dir, 'other', 'their-key', 'not-for-default');
        return { engineCredentialsDir: dir };
      },
      servers: {
        plain: {},
        cred: { engineAuth: { credential: 'qwen-key' } },
        missing: { engineAuth: { credential: 'nope' } },
        elsewhere: { engineAuth: { credential: 'their-key' } },
      },
      pd: { name: 'cred-pd', spec: { engineAuth: { passThrough: false, credential: 'qwen-key' } } },
    });
  });
  afterAll(async () => stack?.close());

  it("sends the named credential to the engine instead of the client's", async () => {
    const res = await stack.chat('cred');
    expect(res.status).toBe(200);
    expect(lastAuth(stack.agg)).toBe('Bearer engine-secret-1');
  });

  it("sends no Authorization to a server that names none (the client's stays at the gateway)", async () => {
    expect((await stack.chat('plain')).status).toBe(200);
    expect(lastAuth(stack.agg)).toBeUndefined();
  });

  it('sends it on every leg of a PD request, prefill and decode', async () => {
    stack.p.clearRequests();
    stack.d.clearRequests();
    const res = await stack.chat('cred-pd', true);
    expect(res.status).toBe(200);
    await res.text();
    expect(inferenceRequests(stack.p).map((r) => r.headers['authorization'])).toEqual(['Bearer engine-secret-1']);
    expect(inferenceRequests(stack.d).map((r) => r.headers['authorization'])).toEqual(['Bearer engine-secret-1']);
  });

  it('picks up a rotated credential on the next request', async () => {
    writeCredential(stack.dir, 'default', 'qwen-key', 'engine-secret-rotated');
    expect((await stack.chat('cred')).status).toBe(200);
    expect(lastAuth(stack.agg)).toBe('Bearer engine-secret-rotated');
  });

  it('answers 503 naming the credential, without calling an engine, when the gateway cannot read it', async () => {
    for (const model of ['missing', 'elsewhere']) {
      const before = inferenceRequests(stack.agg).length;
      const res = await stack.chat(model);
      expect(res.status).toBe(503);
      const body = (await res.json()) as { error: { code: string; message: string } };
      expect(body.error.code).toBe('GATEWAY_ENGINE_CREDENTIAL_UNAVAILABLE');
      // A ModelServer reaches only its own namespace's credentials: `their-key` of namespace `other` is not found.
      expect(body.error.message).toContain(`default/${model === 'missing' ? 'nope' : 'their-key'}`);
      expect(body.error.message).not.toContain('not-for-default');
      expect(inferenceRequests(stack.agg).length).toBe(before);
    }
  });
});
