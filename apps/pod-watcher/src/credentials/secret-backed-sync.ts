import { createHash } from 'node:crypto';
import { objectKey, sealCredential, type SealedCredential } from '@triad/bus';

export interface SecretBackedSyncOptions {
  /** AES-256 key the gateways share, values are sealed with; without one nothing is sealed (the objects say why). */
  readonly credentialsKey?: Uint8Array;
  readonly now?: () => Date;
}

/**
 * The bookkeeping of a sync of objects that name a labelled Secret (ExternalModelProviders' `spec.auth.secretRef`,
 * ModelServers' `spec.engineAuth.secretRef`): which objects are to be decided again (those that changed, and every
 * object of a namespace that names a Secret that changed), and their values sealed for the gateways. Sealing uses
 * a fresh IV, so a value is sealed again only when it changed (else its KV record would be rewritten on every
 * pass). A subclass says which objects name a Secret, and decides each object in its `flush`.
 */
export abstract class SecretBackedSync {
  readonly #credentialsKey: Uint8Array | undefined;
  readonly #now: () => Date;
  /** `namespace/name` of the objects to decide again. */
  readonly #dirty = new Set<string>();
  /** Record key → hash of what was sealed, and its seal. */
  readonly #sealed = new Map<string, { hash: string; sealed: SealedCredential }>();

  protected constructor(options: SecretBackedSyncOptions) {
    this.#credentialsKey = options.credentialsKey;
    this.#now = options.now ?? (() => new Date());
  }

  /** The names of the objects of `namespace` that name Secret `secret`. */
  protected abstract namingSecret(namespace: string, secret: string): Iterable<string>;

  /** A labelled Secret changed or left: every object of its namespace that names it is decided again. */
  secret(namespace: string, name: string): void {
    for (const object of this.namingSecret(namespace, name)) this.mark(namespace, object);
  }

  get pending(): boolean {
    return this.#dirty.size > 0;
  }

  /** An object changed or left. */
  protected mark(namespace: string, name: string): void {
    this.#dirty.add(`${namespace}/${name}`);
  }

  /** Hands every object to decide again to `decide`, with its KV key, then forgets them. */
  protected drain(decide: (namespace: string, name: string, key: string) => void): void {
    for (const id of this.#dirty) {
      const [namespace, name] = id.split('/') as [string, string];
      decide(namespace, name, objectKey(namespace, name));
    }
    this.#dirty.clear();
  }

  /** False without a credentials key: a value that resolves cannot reach the gateways. */
  protected get canSeal(): boolean {
    return this.#credentialsKey !== undefined;
  }

  protected now(): Date {
    return this.#now();
  }

  /**
   * `token` sealed for record `key` under `aad` (only when `canSeal`); the seal made last for `key` while `token`
   * and `context` (what else the record pairs it with, e.g. its scheme) are unchanged.
   */
  protected seal(key: string, token: string, aad: string, context?: string): SealedCredential {
    const hash = createHash('sha256')
      .update(context === undefined ? token : `${context}\n${token}`)
      .digest('hex');
    const cached = this.#sealed.get(key);
    if (cached?.hash === hash) return cached.sealed;
    const sealed = sealCredential(token, this.#credentialsKey as Uint8Array, aad);
    this.#sealed.set(key, { hash, sealed });
    return sealed;
  }

  /** `key` has no value to hand on any more: one that comes back is sealed anew. */
  protected forgetSeal(key: string): void {
    this.#sealed.delete(key);
  }
}
