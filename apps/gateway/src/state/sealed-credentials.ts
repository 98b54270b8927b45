import { openCredential, type SealedCredential } from '@triad/bus';

/** Why a sealed credential cannot be used; never holds the value. */
export interface Unopened {
  readonly error: string;
}

type Opened = { readonly from: object; readonly token: string } | { readonly from: object; readonly error: string };

/**
 * Opens the credentials the pod-watcher publishes sealed (engine Secrets, provider credentials) with the gateway's
 * credentials key, once per record: the value, or why it does not open, is kept in memory against the record object
 * it came in, so a new record under the same key (a rotated Secret) is opened again and an unchanged one is not.
 */
export class SealedCredentials {
  readonly #key: Uint8Array | undefined;
  readonly #opened = new Map<string, Opened>();

  constructor(credentialsKey: Uint8Array | undefined) {
    this.#key = credentialsKey;
  }

  /** The value `sealed` holds (it came in record `from`, under KV key `key`, sealed for `aad`), or why it does not open. */
  open(key: string, from: object, sealed: SealedCredential, aad: string): string | Unopened {
    const cached = this.#opened.get(key);
    if (cached !== undefined && cached.from === from) return 'token' in cached ? cached.token : { error: cached.error };
    if (this.#key === undefined)
      return { error: 'the gateway has no credentials key (TRIAD_CREDENTIALS_KEY_FILE or TRIAD_CREDENTIALS_KEY)' };
    const opened = openCredential(sealed, this.#key, aad);
    this.#opened.set(key, opened.ok ? { from, token: opened.token } : { from, error: opened.error });
    return opened.ok ? opened.token : { error: opened.error };
  }

  /** Drops what was opened under `key`: its record changed or went. */
  forget(key: string): void {
    this.#opened.delete(key);
  }
}
