import type * as Jose from 'jose';
import type { AuthConfig } from '../config/admission-config';
import { compileModelMatcher, type Identity } from '../identity';

export type JwtVerification = { ok: true; identity: Identity } | { ok: false; why: string };

/** Kthena rejects tokens issued more than a minute in the future (`iat`), beyond the clock tolerance. */
const MAX_IAT_SKEW_SEC = 60;

/**
 * Verifies bearer JWTs against a remote JWKS (Kthena's `auth.issuer`, `auth.audiences`, `auth.jwksUri`).
 * Key rotation: jose refetches the set when a token names an unknown `kid`, at most once per `jwksCooldown`,
 * and refreshes it after `jwksMaxAge` regardless. Checks: signature, `iss` exact, `aud` one of the audiences
 * (when configured), `exp` required, `nbf`, and `iat` not in the future.
 */
export class JwtVerifier {
  readonly #jose: typeof Jose;
  readonly #jwks: ReturnType<typeof Jose.createRemoteJWKSet>;
  readonly #config: AuthConfig;
  readonly #now: () => number;
  readonly #tierLabel: () => string;

  constructor(config: AuthConfig, now: () => number, tierLabel: () => string) {
    if (!config.jwksUri) throw new Error('JwtVerifier needs auth.jwksUri');
    this.#jose = require('jose') as typeof Jose;
    this.#config = config;
    this.#now = now;
    this.#tierLabel = tierLabel;
    this.#jwks = this.#jose.createRemoteJWKSet(new URL(config.jwksUri), {
      cooldownDuration: config.jwt.jwksCooldown,
      cacheMaxAge: config.jwt.jwksMaxAge,
      timeoutDuration: config.jwt.jwksTimeout,
    });
  }

  /** True when this verifier was built from the same JWT settings (so a reload can keep its key cache). */
  sameSettings(config: AuthConfig): boolean {
    return (
      JSON.stringify([config.jwksUri, config.jwt.jwksCooldown, config.jwt.jwksMaxAge, config.jwt.jwksTimeout]) ===
      JSON.stringify([this.#config.jwksUri, this.#config.jwt.jwksCooldown, this.#config.jwt.jwksMaxAge, this.#config.jwt.jwksTimeout])
    );
  }

  /** `config` is the current auth section: issuer, audiences and claim names follow reloads without a refetch. */
  async verify(token: string, config: AuthConfig = this.#config): Promise<JwtVerification> {
    const jose = this.#jose;
    const nowMs = this.#now();
    let payload: Jose.JWTPayload;
    try {
      const audiences = config.audiences && config.audiences.length > 0 ? config.audiences : undefined;
      ({ payload } = await jose.jwtVerify(token, this.#jwks, {
        ...(config.issuer !== undefined ? { issuer: config.issuer } : {}),
        ...(audiences ? { audience: audiences } : {}),
        requiredClaims: ['exp'],
        clockTolerance: Math.round(config.jwt.clockTolerance / 1000),
        currentDate: new Date(nowMs),
      }));
    } catch (err) {
      return { ok: false, why: describeJoseError(err) };
    }
    if (typeof payload.iat === 'number' && payload.iat > nowMs / 1000 + MAX_IAT_SKEW_SEC + config.jwt.clockTolerance / 1000) {
      return { ok: false, why: 'token issued in the future' };
    }
    const user = payload[config.jwt.userClaim];
    if (typeof user !== 'string' || user === '') return { ok: false, why: `token has no '${config.jwt.userClaim}' claim` };
    return { ok: true, identity: identityFromClaims(payload, user, config, this.#tierLabel()) };
  }
}

function identityFromClaims(payload: Jose.JWTPayload, user: string, config: AuthConfig, tierLabel: string): Identity {
  const tierClaim = config.jwt.tierClaim ?? tierLabel;
  const tier = payload[tierClaim];
  const modelsClaim = config.jwt.modelsClaim !== undefined ? payload[config.jwt.modelsClaim] : undefined;
  const models = Array.isArray(modelsClaim)
    ? modelsClaim.filter((m): m is string => typeof m === 'string')
    : typeof modelsClaim === 'string'
      ? modelsClaim.split(/\s+/).filter(Boolean)
      : undefined;
  return {
    kind: 'jwt',
    id: `jwt:${user}`,
    user,
    name: user,
    labels: {},
    ...(typeof tier === 'string' ? { tier } : {}),
    ...(models !== undefined ? { models: compileModelMatcher(models) } : {}),
  };
}

/** A short reason for the 401 body; jose's codes say which check failed without echoing the token. */
function describeJoseError(err: unknown): string {
  const code = (err as { code?: string }).code ?? '';
  const claim = (err as { claim?: string }).claim;
  switch (code) {
    case 'ERR_JWT_EXPIRED':
      return 'token expired';
    case 'ERR_JWT_CLAIM_VALIDATION_FAILED':
      return `token claim '${claim ?? '?'}' check failed`;
    case 'ERR_JWS_SIGNATURE_VERIFICATION_FAILED':
      return 'token signature does not verify';
    case 'ERR_JWKS_NO_MATCHING_KEY':
      return 'token signed by an unknown key';
    case 'ERR_JWKS_TIMEOUT':
      return 'signing keys could not be fetched in time';
    case 'ERR_JWT_INVALID':
    case 'ERR_JWS_INVALID':
      return 'malformed token';
    case 'ERR_JOSE_ALG_NOT_ALLOWED':
    case 'ERR_JOSE_NOT_SUPPORTED':
      return 'token algorithm not accepted';
    default:
      return 'token could not be verified';
  }
}
