import { createHash } from 'node:crypto';
import {
  SCHEMA_VERSION,
  objectKey,
  sealCredential,
  type ExternalProviderRecord,
  type ProviderCredentialRecord,
  type ProviderResolution,
} from '@triad/bus';
import type { ModelRoute } from '@triad/crd';
import type { Inventory } from '../inventory/inventory';
import type { StatusReporter } from '../inventory/status-reporter';
import type { KvPublisher } from '../publish/kv-publisher';
import { decideProvider, type ResolvedCredential } from './provider-state';

export interface ProviderSyncOptions {
  readonly inventory: Inventory;
  readonly providers: KvPublisher<ExternalProviderRecord>;
  readonly credentials: KvPublisher<ProviderCredentialRecord>;
  readonly status?: StatusReporter;
  /** AES-256 key the gateway shares; without one, credentials are not published (providers say why). */
  readonly credentialsKey?: Uint8Array;
  readonly now?: () => Date;
}

/**
 * Keeps ExternalModelProvider records, their sealed credentials and their status in step with the providers and
 * the labelled Secrets. A Secret change re-decides every provider of its namespace that names it. Sealing uses
 * a fresh IV, so a credential is sealed again only when its value or scheme changed (else its KV record would be
 * rewritten on every pass).
 */
export class ProviderSync {
  readonly #opts: ProviderSyncOptions;
  readonly #dirty = new Set<string>();
  /** Provider key → hash of the sealed value and the sealed record. */
  readonly #sealed = new Map<string, { hash: string; record: ProviderCredentialRecord }>();

  constructor(options: ProviderSyncOptions) {
    this.#opts = options;
  }

  provider(namespace: string, name: string): void {
    this.#dirty.add(`${namespace}/${name}`);
  }

  /** A credential Secret changed: every provider of its namespace that names it is decided again. */
  secret(namespace: string, name: string): void {
    for (const p of this.#opts.inventory.list('ExternalModelProvider', namespace)) {
      if (p.spec.auth?.secretRef.name === name) this.#dirty.add(`${namespace}/${p.metadata.name}`);
    }
  }

  get pending(): boolean {
    return this.#dirty.size > 0;
  }

  /** Applies pending changes; returns the namespaces whose providers' existence, readiness or reason changed. */
  flush(): Set<string> {
    const changed = new Set<string>();
    const { inventory, providers, credentials, status } = this.#opts;
    for (const id of this.#dirty) {
      const [namespace, name] = id.split('/') as [string, string];
      const key = objectKey(namespace, name);
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
        canSeal: this.#opts.credentialsKey !== undefined,
        now: (this.#opts.now ?? (() => new Date()))(),
      });
      const before = providers.get(key);
      if (outcome.record) providers.set(key, outcome.record);
      else providers.remove(key);
      // Route records show each provider's existence, readiness and reason.
      if (before?.ready !== outcome.record?.ready || before?.reason !== outcome.record?.reason) changed.add(namespace);
      if (outcome.credential) credentials.set(key, this.#seal(key, namespace, name, outcome.credential));
      else {
        credentials.remove(key);
        this.#sealed.delete(key);
      }
      if (observed) status?.conditions('ExternalModelProvider', namespace, name, outcome.conditions, observed, observed.generation);
    }
    this.#dirty.clear();
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

  #seal(key: string, namespace: string, provider: string, c: ResolvedCredential): ProviderCredentialRecord {
    const hash = createHash('sha256').update(`${c.scheme}\n${c.token}`).digest('hex');
    const cached = this.#sealed.get(key);
    if (cached?.hash === hash) return cached.record;
    const record: ProviderCredentialRecord = {
      schemaVersion: SCHEMA_VERSION,
      namespace,
      provider,
      scheme: c.scheme,
      header: c.header,
      sealed: sealCredential(c.token, this.#opts.credentialsKey as Uint8Array, key),
    };
    this.#sealed.set(key, { hash, record });
    return record;
  }
}
