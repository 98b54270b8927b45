import {
  Buckets,
  ExternalProviderRecordSchema,
  ProviderCredentialRecordSchema,
  objectKey,
  type ExternalProviderRecord,
  type ProviderCredentialRecord,
} from '@triad/bus';
import type { Bus, KvChange, KvWatchHandle } from '@triad/bus/client';
import { SealedCredentials, type Unopened } from '../state/sealed-credentials';

/** A provider ready to be called: its record and, when it authenticates, the header to set (never logged). */
export interface ResolvedProvider {
  readonly record: ExternalProviderRecord;
  /** `[header, value]`: `authorization: Bearer <token>` or `x-api-key: <token>`; undefined without auth. */
  readonly auth: readonly [name: string, value: string] | undefined;
  /** The bare credential, so error bodies can be scrubbed of it. */
  readonly secret: string | undefined;
}

/** Why a provider cannot be called now; `message` never contains a credential. */
export interface ProviderUnavailable {
  readonly found: boolean;
  readonly message: string;
}

/**
 * The gateway's view of the pod-watcher's provider buckets: validated ExternalModelProviders
 * (`triad_v1_externalproviders`) and their sealed credentials (`triad_v1_provider_credentials`, same key). A
 * credential is opened with the credentials key once per record and kept in memory only.
 */
export class ProviderDirectory {
  readonly #providers = new Map<string, ExternalProviderRecord>();
  readonly #credentials = new Map<string, ProviderCredentialRecord>();
  readonly #sealed: SealedCredentials;
  #watches: KvWatchHandle[] = [];

  constructor(credentialsKey: Uint8Array | undefined) {
    this.#sealed = new SealedCredentials(credentialsKey);
  }

  async start(bus: Bus): Promise<void> {
    const [providers, credentials] = await Promise.all([
      bus.kv(Buckets.externalProviders, ExternalProviderRecordSchema),
      bus.kv(Buckets.providerCredentials, ProviderCredentialRecordSchema),
    ]);
    this.#watches = await Promise.all([
      providers.watch({ onChange: (c) => this.#apply(this.#providers, c) }),
      credentials.watch({
        onChange: (c) => {
          this.#sealed.forget(c.key);
          this.#apply(this.#credentials, c);
        },
      }),
    ]);
    await Promise.all(this.#watches.map((w) => w.synced));
  }

  stop(): void {
    for (const w of this.#watches) w.stop();
    this.#watches = [];
  }

  #apply<T>(map: Map<string, T>, change: KvChange<T>): void {
    if (change.op === 'PUT') map.set(change.key, change.value);
    else map.delete(change.key);
  }

  /** The provider `name` in `namespace`, with its credential opened, or why it cannot be used. */
  resolve(namespace: string, name: string): ResolvedProvider | ProviderUnavailable {
    const key = objectKey(namespace, name);
    const record = this.#providers.get(key);
    if (record === undefined) return { found: false, message: `can't find external model provider: ${namespace}/${name}` };
    if (!record.ready)
      return { found: true, message: `external model provider ${namespace}/${name} is not ready (${record.reason}): ${record.message}` };
    if (record.auth === undefined) return { record, auth: undefined, secret: undefined };
    const token = this.#token(key);
    if (typeof token !== 'string') {
      return { found: true, message: `the credential of external model provider ${namespace}/${name} is not available: ${token.error}` };
    }
    return { record, auth: [record.auth.header, record.auth.header === 'authorization' ? `Bearer ${token}` : token], secret: token };
  }

  #token(key: string): string | Unopened {
    const record = this.#credentials.get(key);
    if (record === undefined) return { error: 'not published yet' };
    return this.#sealed.open(key, record, record.sealed, key);
  }
}

export function isResolved(p: ResolvedProvider | ProviderUnavailable): p is ResolvedProvider {
  return 'record' in p;
}
