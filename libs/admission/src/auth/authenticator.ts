import type { AdmissionConfig, AuthConfig } from '../config/admission-config';
import { watchFile } from '@triad/runtime';
import { loadDocument } from '../config/config-file';
import { ANONYMOUS, type Identity } from '../identity';
import type { AdmissionMetrics } from '../metrics';
import { Rejections, type AdmissionRejection } from '../rejection';
import type { AdmissionLogger } from '../logger';
import { ApiKeyFileSchema, type ApiKeyEntry } from './api-key-file';
import { ApiKeyRegistry } from './api-key-registry';
import { JwtVerifier } from './jwt-verifier';

export type AuthOutcome = { ok: true; identity: Identity } | { ok: false; rejection: AdmissionRejection };

/** Request headers as Node gives them, or anything with a `get(name)` (fetch/undici `Headers`). */
export type RequestHeaders =
  Readonly<Record<string, string | readonly string[] | undefined>> | { get(name: string): string | null | undefined };

const JWT_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

function authorizationOf(headers: RequestHeaders): string | undefined {
  if (typeof (headers as { get?: unknown }).get === 'function') {
    return (headers as { get(n: string): string | null | undefined }).get('authorization') ?? undefined;
  }
  const v = (headers as Record<string, string | readonly string[] | undefined>)['authorization'];
  return Array.isArray(v) ? v[0] : (v as string | undefined);
}

/**
 * Turns `Authorization: Bearer <credential>` into an {@link Identity}: `sk-...` credentials are API keys, three
 * dot-separated segments are JWTs. With neither keys nor a JWKS configured, everyone is `anonymous`.
 * Credentials never reach a log line or an error message.
 */
export class Authenticator {
  readonly #registry: ApiKeyRegistry;
  readonly #metrics: AdmissionMetrics;
  readonly #logger: AdmissionLogger;
  readonly #now: () => number;
  #config: AdmissionConfig;
  #jwt: JwtVerifier | undefined;
  #fileKeys: readonly ApiKeyEntry[] = [];
  #watch: { close(): void } | undefined;
  #watchedPath: string | undefined;

  constructor(config: AdmissionConfig, deps: { metrics: AdmissionMetrics; logger: AdmissionLogger; now: () => number }) {
    this.#metrics = deps.metrics;
    this.#logger = deps.logger;
    this.#now = deps.now;
    this.#config = config;
    this.#registry = new ApiKeyRegistry(config.auth.apiKeys.cacheSize, () => this.#config.rateLimit.tierLabel);
    this.update(config);
  }

  /** True when credentials are required (keys or JWKS configured and anonymous access off). */
  get enabled(): boolean {
    return this.#configured(this.#config.auth);
  }

  #configured(auth: AuthConfig): boolean {
    return auth.jwksUri !== undefined || auth.apiKeys.keys.length > 0 || auth.apiKeys.file !== undefined;
  }

  /**
   * Applies a new config. Throws when the key file named by it cannot be loaded (the caller keeps the old
   * config); a later bad edit of the same file is logged and the last good keys stay.
   */
  update(config: AdmissionConfig): void {
    const file = config.auth.apiKeys.file;
    if (file !== undefined && file !== this.#watchedPath) {
      const loaded = loadDocument(ApiKeyFileSchema, file);
      if (!loaded.ok) throw new Error(loaded.problems.join('; '));
      this.#watch?.close();
      this.#fileKeys = loaded.value.keys;
      this.#watchedPath = file;
      this.#watch = watchFile(
        file,
        () => {
          const next = loadDocument(ApiKeyFileSchema, file);
          if (!next.ok) {
            this.#metrics.configReloads.inc({ source: 'api_keys', result: 'rejected' });
            this.#logger.warn({ file, problems: next.problems }, 'api key file rejected; keeping the last good keys');
            return;
          }
          this.#fileKeys = next.value.keys;
          this.#registry.replace([...this.#config.auth.apiKeys.keys, ...this.#fileKeys]);
          this.#metrics.configReloads.inc({ source: 'api_keys', result: 'applied' });
          this.#logger.info({ file, keys: next.value.keys.length }, 'api key file reloaded');
        },
        (err) => this.#logger.warn({ file, err: err.message }, 'api key file watch failed; edits are not applied'),
      );
    } else if (file === undefined) {
      this.#watch?.close();
      this.#watch = undefined;
      this.#watchedPath = undefined;
      this.#fileKeys = [];
    }
    const previous = this.#config;
    this.#config = config;
    this.#registry.replace([...config.auth.apiKeys.keys, ...this.#fileKeys]);
    if (!config.auth.jwksUri) this.#jwt = undefined;
    else if (!this.#jwt || !this.#jwt.sameSettings(config.auth) || previous.auth.jwksUri !== config.auth.jwksUri) {
      this.#jwt = new JwtVerifier(config.auth, this.#now, () => this.#config.rateLimit.tierLabel);
    }
  }

  async authenticate(headers: RequestHeaders): Promise<AuthOutcome> {
    const auth = this.#config.auth;
    if (!this.#configured(auth)) return { ok: true, identity: ANONYMOUS };
    const header = authorizationOf(headers);
    if (header === undefined || header.trim() === '') {
      if (auth.allowAnonymous) return this.#pass('none', ANONYMOUS);
      return this.#fail('none', 'missing', Rejections.missingCredentials());
    }
    const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (!m) return this.#fail('none', 'malformed', Rejections.invalidCredentials('expected "Authorization: Bearer <credential>"'));
    const credential = m[1];
    if (credential.startsWith('sk-')) {
      const verified = this.#registry.cached(credential) ?? (await this.#registry.verify(credential));
      return verified.ok
        ? this.#pass('api_key', verified.identity)
        : this.#fail('api_key', 'invalid', Rejections.invalidCredentials('unknown or revoked API key'));
    }
    if (this.#jwt && JWT_SHAPE.test(credential)) {
      const verified = await this.#jwt.verify(credential, auth);
      return verified.ok ? this.#pass('jwt', verified.identity) : this.#fail('jwt', 'invalid', Rejections.invalidCredentials(verified.why));
    }
    return this.#fail('none', 'malformed', Rejections.invalidCredentials('unrecognised credential'));
  }

  #pass(method: string, identity: Identity): AuthOutcome {
    this.#metrics.auth.inc({ method, result: 'ok' });
    return { ok: true, identity };
  }

  #fail(method: string, result: string, rejection: AdmissionRejection): AuthOutcome {
    this.#metrics.auth.inc({ method, result });
    return { ok: false, rejection };
  }

  close(): void {
    this.#watch?.close();
    this.#watch = undefined;
  }
}
