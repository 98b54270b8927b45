import { createHash } from 'node:crypto';
import {
  SCHEMA_VERSION,
  engineCredentialAad,
  objectKey,
  sealCredential,
  type EngineCredentialRecord,
  type SealedCredential,
} from '@triad/bus';
import { ProviderReasons, makeCondition } from '@triad/crd';
import { currentConditions } from '../inventory/accepted-condition';
import type { Inventory } from '../inventory/inventory';
import type { StatusReporter } from '../inventory/status-reporter';
import type { KvPublisher } from '../publish/kv-publisher';
import { ENGINE_CREDENTIAL_CONDITION, engineCredentialCondition, resolveEngineCredential } from './engine-credential-state';

export interface EngineCredentialSyncOptions {
  readonly inventory: Inventory;
  readonly records: KvPublisher<EngineCredentialRecord>;
  readonly status?: StatusReporter;
  /** The key provider credentials are sealed with; without one, engine credentials say CredentialNotDistributable. */
  readonly credentialsKey?: Uint8Array;
  readonly now?: () => Date;
}

/**
 * Keeps `triad_v1_engine_credentials` and the ModelServers' `EngineCredentialResolved` condition in step with the
 * ModelServers that name a Secret (`spec.engineAuth.secretRef`) and the labelled Secrets the inventory holds (the
 * ones providers read). A Secret change re-decides every ModelServer of its namespace that names it. Sealing uses a
 * fresh IV, so a value is sealed again only when it changed (else its record would be rewritten on every pass).
 */
export class EngineCredentialSync {
  readonly #opts: EngineCredentialSyncOptions;
  readonly #dirty = new Set<string>();
  /** Record key → hash of the value and its seal. */
  readonly #sealed = new Map<string, { hash: string; sealed: SealedCredential }>();

  constructor(options: EngineCredentialSyncOptions) {
    this.#opts = options;
  }

  /** A ModelServer changed or left. */
  server(namespace: string, name: string): void {
    this.#dirty.add(`${namespace}/${name}`);
  }

  /** A labelled Secret changed or left: every ModelServer of its namespace that names it is decided again. */
  secret(namespace: string, name: string): void {
    for (const ms of this.#opts.inventory.modelServers(namespace)) {
      if (ms.spec.engineAuth?.secretRef?.name === name) this.#dirty.add(`${namespace}/${ms.metadata.name}`);
    }
  }

  get pending(): boolean {
    return this.#dirty.size > 0;
  }

  flush(): void {
    const { inventory, records, status, credentialsKey } = this.#opts;
    const now = (this.#opts.now ?? (() => new Date()))();
    for (const id of this.#dirty) {
      const [namespace, name] = id.split('/') as [string, string];
      const key = objectKey(namespace, name);
      const server = inventory.modelServer(namespace, name);
      const ref = server?.spec.engineAuth?.secretRef;
      const observed = inventory.observed('ModelServer', namespace, name);
      if (!ref) {
        records.remove(key);
        this.#sealed.delete(key);
        // A server that no longer names a Secret: a condition left from when it did would mislead.
        if (server && observed && currentConditions(observed).some((c) => c.type === ENGINE_CREDENTIAL_CONDITION)) {
          const cleared = makeCondition(
            ENGINE_CREDENTIAL_CONDITION,
            true,
            ProviderReasons.credentialNotRequired,
            'spec.engineAuth.secretRef is not set',
            observed.generation,
            now,
          );
          status?.conditions('ModelServer', namespace, name, [cleared], observed);
        }
        continue;
      }
      const outcome = resolveEngineCredential(namespace, ref, (ns, n) => inventory.secrets.get(ns, n), credentialsKey !== undefined);
      const record: EngineCredentialRecord = {
        schemaVersion: SCHEMA_VERSION,
        namespace,
        server: name,
        secretRef: { name: ref.name, key: ref.key },
        resolved: outcome.resolved,
        reason: outcome.reason,
        message: outcome.message,
        ...(outcome.resolved ? { sealed: this.#seal(key, outcome.token) } : {}),
      };
      if (!outcome.resolved) this.#sealed.delete(key);
      records.set(key, record);
      if (observed)
        status?.conditions('ModelServer', namespace, name, [engineCredentialCondition(outcome, observed.generation, now)], observed);
    }
    this.#dirty.clear();
  }

  #seal(key: string, token: string): SealedCredential {
    const hash = createHash('sha256').update(token).digest('hex');
    const cached = this.#sealed.get(key);
    if (cached?.hash === hash) return cached.sealed;
    const sealed = sealCredential(token, this.#opts.credentialsKey as Uint8Array, engineCredentialAad(key));
    this.#sealed.set(key, { hash, sealed });
    return sealed;
  }
}
