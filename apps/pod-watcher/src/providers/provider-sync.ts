import { SCHEMA_VERSION, objectKey, type ExternalProviderRecord, type ProviderCredentialRecord, type ProviderResolution } from '@triad/bus';
import type { ModelRoute } from '@triad/crd';
import { SecretBackedSync, type SecretBackedSyncOptions } from '../credentials/secret-backed-sync';
import type { Inventory } from '../inventory/inventory';
import type { StatusReporter } from '../inventory/status-reporter';
import type { KvPublisher } from '../publish/kv-publisher';
import { decideProvider, type ResolvedCredential } from './provider-state';

/** Without a credentials key, credentials are not published (providers say why). */
export interface ProviderSyncOptions extends SecretBackedSyncOptions {
  readonly inventory: Inventory;
  readonly status?: StatusReporter;
  readonly providers: KvPublisher<ExternalProviderRecord>;
  readonly credentials: KvPublisher<ProviderCredentialRecord>;
}

/**
 * Keeps ExternalModelProvider records, their sealed credentials and their status in step with the providers and
 * the labelled Secrets. A credential is sealed again only when its value or scheme changed.
 */
export class ProviderSync extends SecretBackedSync {
  readonly #opts: ProviderSyncOptions;

  constructor(options: ProviderSyncOptions) {
    super(options);
    this.#opts = options;
  }

  provider(namespace: string, name: string): void {
    this.mark(namespace, name);
  }

  protected *namingSecret(namespace: string, secret: string): Iterable<string> {
    for (const p of this.#opts.inventory.list('ExternalModelProvider', namespace)) {
      if (p.spec.auth?.secretRef.name === secret) yield p.metadata.name;
    }
  }

  /** Applies pending changes; returns the namespaces whose providers' existence, readiness or reason changed. */
  flush(): Set<string> {
    const changed = new Set<string>();
    const { inventory, providers, credentials, status } = this.#opts;
    this.drain((namespace, name, key) => {
      const observed = inventory.observed('ExternalModelProvider', namespace, name);
      const valid = inventory.get('ExternalModelProvider', namespace, name);
      const problems = inventory.problems('ExternalModelProvider', namespace, name);
      const outcome = decideProvider({
        namespace,
        name,
        ...(valid ? { valid } : {}),
        ...(problems ? { problems } : {}),
        ...(observed?.generation !== undefined ? { generation: observed.generation } : {}),
        secret: (ns, n) => inventory.secrets.get(ns, n),
        canSeal: this.canSeal,
        now: this.now(),
      });
      const before = providers.get(key);
      if (outcome.record) providers.set(key, outcome.record);
      else providers.remove(key);
      // Route records show each provider's existence, readiness and reason.
      if (before?.ready !== outcome.record?.ready || before?.reason !== outcome.record?.reason) changed.add(namespace);
      if (outcome.credential) credentials.set(key, this.#credentialRecord(key, namespace, name, outcome.credential));
      else {
        credentials.remove(key);
        this.forgetSeal(key);
      }
      if (observed) status?.conditions('ExternalModelProvider', namespace, name, outcome.conditions, observed, observed.generation);
    });
    return changed;
  }

  /** How the providers a route's targets name stand now (undefined when it names none). */
  resolve(route: ModelRoute): ProviderResolution[] | undefined {
    const targets = (route.spec.rules ?? []).flatMap((r) => r.targetModels);
    const names = new Set(targets.map((t) => t.externalModelProviderName).filter((n): n is string => !!n));
    if (names.size === 0) return undefined;
    const ns = route.metadata.namespace;
    return [...names].sort().map((name) => {
      const key = objectKey(ns, name);
      const record = this.#opts.providers.get(key);
      if (!record) return { name, key, found: false, ready: false, reason: 'NotFound' };
      return { name, key, found: true, ready: record.ready, reason: record.reason };
    });
  }

  /** The credential's record; its value sealed under the bare KV key (a provider credential's AAD). */
  #credentialRecord(key: string, namespace: string, provider: string, c: ResolvedCredential): ProviderCredentialRecord {
    return {
      schemaVersion: SCHEMA_VERSION,
      namespace,
      provider,
      scheme: c.scheme,
      header: c.header,
      sealed: this.seal(key, c.token, key, c.scheme),
    };
  }
}
