import { SCHEMA_VERSION, engineCredentialAad, type EngineCredentialRecord } from '@triad/bus';
import { ProviderReasons, makeCondition } from '@triad/crd';
import { SecretBackedSync, type SecretBackedSyncOptions } from '../credentials/secret-backed-sync';
import { currentConditions } from '../inventory/accepted-condition';
import type { Inventory } from '../inventory/inventory';
import type { StatusReporter } from '../inventory/status-reporter';
import type { KvPublisher } from '../publish/kv-publisher';
import { ENGINE_CREDENTIAL_CONDITION, engineCredentialCondition, resolveEngineCredential } from './engine-credential-state';

/** Without a credentials key, engine credentials say CredentialNotDistributable. */
export interface EngineCredentialSyncOptions extends SecretBackedSyncOptions {
  readonly inventory: Inventory;
  readonly status?: StatusReporter;
  readonly records: KvPublisher<EngineCredentialRecord>;
}

/**
 * Keeps `triad_v1_engine_credentials` and the ModelServers' `EngineCredentialResolved` condition in step with the
 * ModelServers that name a Secret (`spec.engineAuth.secretRef`) and the labelled Secrets the inventory holds (the
 * ones providers read).
 */
export class EngineCredentialSync extends SecretBackedSync {
  readonly #opts: EngineCredentialSyncOptions;

  constructor(options: EngineCredentialSyncOptions) {
    super(options);
    this.#opts = options;
  }

  /** A ModelServer changed or left. */
  server(namespace: string, name: string): void {
    this.mark(namespace, name);
  }

  protected *namingSecret(namespace: string, secret: string): Iterable<string> {
    for (const ms of this.#opts.inventory.modelServers(namespace)) {
      if (ms.spec.engineAuth?.secretRef?.name === secret) yield ms.metadata.name;
    }
  }

  flush(): void {
    const { inventory, records, status } = this.#opts;
    const now = this.now();
    this.drain((namespace, name, key) => {
      const server = inventory.modelServer(namespace, name);
      const ref = server?.spec.engineAuth?.secretRef;
      const observed = inventory.observed('ModelServer', namespace, name);
      if (!ref) {
        records.remove(key);
        this.forgetSeal(key);
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
        return;
      }
      const outcome = resolveEngineCredential(namespace, ref, (ns, n) => inventory.secrets.get(ns, n), this.canSeal);
      const record: EngineCredentialRecord = {
        schemaVersion: SCHEMA_VERSION,
        namespace,
        server: name,
        secretRef: { name: ref.name, key: ref.key },
        resolved: outcome.resolved,
        reason: outcome.reason,
        message: outcome.message,
        ...(outcome.resolved ? { sealed: this.seal(key, outcome.token, engineCredentialAad(key)) } : {}),
      };
      if (!outcome.resolved) this.forgetSeal(key);
      records.set(key, record);
      if (observed)
        status?.conditions('ModelServer', namespace, name, [engineCredentialCondition(outcome, observed.generation, now)], observed);
    });
  }
}
