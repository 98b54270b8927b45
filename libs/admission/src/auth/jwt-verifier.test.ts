import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Registry } from 'prom-client';
import { SignJWT, exportJWK, generateKeyPair, type JWK } from 'jose';
import { createAdmission, type Admission } from '../admission';
import { answeredOutcome } from '../../test/answered';

type PrivateKey = Awaited<ReturnType<typeof generateKeyPair>>['privateKey'];

async function signingKey(kid: string): Promise<{ kid: string; privateKey: PrivateKey; jwk: JWK }> {
  const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true });
  return { kid, privateKey, jwk: { ...(await exportJWK(publicKey)), kid, alg: 'ES256', use: 'sig' } };
}

/** A JWKS endpoint whose key set the test swaps, counting fetches. */
class JwksServer {
  keys: JWK[] = [];
  fetches = 0;
  readonly server: Server = createServer((_req, res) => {
    this.fetches++;
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: this.keys }));
  });

  async listen(): Promise<string> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/jwks.json`;
  }

  close(): Promise<void> {
    return new Promise((r) => this.server.close(() => r()));
  }
}

const ISSUER = 'https://issuer.example';

async function token(
  key: { kid: string; privateKey: PrivateKey },
  claims: Record<string, unknown> = {},
  opts: { exp?: number | string | null; aud?: string; iss?: string; iat?: number } = {},
): Promise<string> {
  let jwt = new SignJWT({ tier: 'pro', models: ['llama-*'], ...claims })
    .setProtectedHeader({ alg: 'ES256', kid: key.kid })
    .setIssuer(opts.iss ?? ISSUER)
    .setAudience(opts.aud ?? 'triad')
    .setSubject('user-1')
    .setIssuedAt(opts.iat);
  if (opts.exp !== null) jwt = jwt.setExpirationTime(opts.exp ?? '5m');
  return jwt.sign(key.privateKey);
}

describe('JWT authentication with a rotating JWKS', () => {
  const jwks = new JwksServer();
  const admissions: Admission[] = [];
  let uri: string;
  beforeAll(async () => {
    uri = await jwks.listen();
  });
  afterAll(async () => {
    await Promise.all(admissions.map((a) => a.close()));
    await jwks.close();
  });
  const make = async (jwtOpts: Record<string, unknown>): Promise<Admission> => {
    // Kthena's `auth` keys, as they appear in its router configuration.
    const a = await createAdmission(
      {
        auth: {
          issuer: ISSUER,
          audiences: ['triad', 'other'],
          jwksUri: uri,
          jwt: { tierClaim: 'tier', modelsClaim: 'models', ...jwtOpts },
        },
      },
      { registry: new Registry() },
    );
    admissions.push(a);
    return a;
  };
  const bearer = (t: string) => ({ authorization: `Bearer ${t}` });

  it('accepts a valid token, takes the subject as the user, and refetches the set for a new kid after rotation', async () => {
    const k1 = await signingKey('k1');
    const k2 = await signingKey('k2');
    jwks.keys = [k1.jwk];
    jwks.fetches = 0;
    const admission = await make({ jwksCooldown: 0 });
    const first = await admission.authenticate(bearer(await token(k1)));
    expect(first).toMatchObject({ ok: true, identity: { kind: 'jwt', id: 'jwt:user-1', user: 'user-1', tier: 'pro' } });
    expect(first.ok && first.identity.models?.allows('llama-3')).toBe(true);
    expect(first.ok && first.identity.models?.allows('gpt-4o')).toBe(false);
    jwks.keys = [k2.jwk]; // the issuer rotated
    expect(await admission.authenticate(bearer(await token(k2)))).toMatchObject({ ok: true, identity: { user: 'user-1' } });
    expect(jwks.fetches).toBe(2);
    expect(answeredOutcome(await admission.authenticate(bearer(await token(k1))))).toMatchObject({ ok: false, rejection: { status: 401 } });
  });

  it('bounds refetches: an unknown kid within the cooldown does not hit the JWKS endpoint again', async () => {
    const k1 = await signingKey('c1');
    const k2 = await signingKey('c2');
    jwks.keys = [k1.jwk];
    jwks.fetches = 0;
    const admission = await make({ jwksCooldown: '1h' });
    expect((await admission.authenticate(bearer(await token(k1)))).ok).toBe(true);
    jwks.keys = [k2.jwk];
    const refused = await admission.authenticate(bearer(await token(k2)));
    expect(answeredOutcome(refused)).toMatchObject({
      ok: false,
      rejection: { status: 401, message: 'Invalid credentials: token signed by an unknown key.' },
    });
    await admission.authenticate(bearer(await token(k2)));
    expect(jwks.fetches).toBe(1);
  });

  it('checks expiry, issuer, audience and the presence of exp', async () => {
    const k = await signingKey('v1');
    jwks.keys = [k.jwk];
    const admission = await make({ clockTolerance: 0 });
    const reason = async (t: string): Promise<string> => {
      const r = await admission.authenticate(bearer(t));
      return r.ok ? 'ok' : r.rejection.message;
    };
    expect(await reason(await token(k, {}, { exp: Math.floor(Date.now() / 1000) - 10 }))).toBe('Invalid credentials: token expired.');
    expect(await reason(await token(k, {}, { iss: 'https://evil.example' }))).toBe("Invalid credentials: token claim 'iss' check failed.");
    expect(await reason(await token(k, {}, { aud: 'someone-else' }))).toBe("Invalid credentials: token claim 'aud' check failed.");
    expect(await reason(await token(k, {}, { exp: null }))).toBe("Invalid credentials: token claim 'exp' check failed.");
    expect(await reason(await token(k, {}, { iat: Math.floor(Date.now() / 1000) + 3600, exp: Math.floor(Date.now() / 1000) + 7200 }))).toBe(
      'Invalid credentials: token issued in the future.',
    );
    expect(await reason(await token(k, {}, { aud: 'other' }))).toBe('ok');
    expect(await reason('not.a.jwt')).toBe('Invalid credentials: malformed token.');
  });
});
