import {
  INFERENCE_ENGINE_ANNOTATION,
  formatProblem,
  isPodReady,
  validateResource,
  type ExternalModelProvider,
  type Gateway,
  type HttpRoute,
  type InferencePool,
  type ModelRoute,
  type ModelServer,
  type Pod,
  type ValidationProblem,
} from '@triad/crd';
import type { Logger } from '@triad/runtime';
import type { WatcherMetrics } from '../ops/metrics';
import { SecretStore } from './secret-store';
import type { ObservedObject, StatusReporter } from './status-reporter';

export type { StatusReporter } from './status-reporter';

/** Kinds validated by libs/crd and kept in their last valid version. */
export type ValidatedKind = 'ModelServer' | 'ModelRoute' | 'Pod' | 'ExternalModelProvider' | 'Gateway' | 'HTTPRoute' | 'InferencePool';
/** Every kind a source delivers: the validated ones, credential Secrets and Namespaces (their labels). */
export type WatchedKind = ValidatedKind | 'Secret' | 'Namespace';
export const VALIDATED_KINDS: readonly ValidatedKind[] = [
  'ModelServer',
  'ModelRoute',
  'Pod',
  'ExternalModelProvider',
  'Gateway',
  'HTTPRoute',
  'InferencePool',
];
export const WATCHED_KINDS: readonly WatchedKind[] = [...VALIDATED_KINDS, 'Secret', 'Namespace'];

interface KindTypes {
  ModelServer: ModelServer;
  ModelRoute: ModelRoute;
  Pod: Pod;
  ExternalModelProvider: ExternalModelProvider;
  Gateway: Gateway;
  HTTPRoute: HttpRoute;
  InferencePool: InferencePool;
}

export interface InventoryChange {
  readonly kind: WatchedKind;
  readonly namespace: string;
  readonly name: string;
}

interface Entry {
  readonly value: unknown;
  /** What of the object matters downstream; an update that leaves it unchanged is not a change. */
  readonly fingerprint: string;
}

type ByNamespace = Map<string, Map<string, Entry>>;

// Only these parts of a pod feed classification and addressing: resourceVersion bumps, container statuses and
// the like must not wake the reconciler.
const podFingerprint = (p: Pod): string =>
  JSON.stringify([p.metadata.labels ?? {}, p.metadata.annotations ?? {}, p.status?.podIP ?? '', isPodReady(p)]);

function fingerprint(value: KindTypes[ValidatedKind]): string {
  switch (value.kind) {
    case 'Pod':
      return podFingerprint(value);
    case 'InferencePool':
      return JSON.stringify([value.spec, value.metadata.annotations?.[INFERENCE_ENGINE_ANNOTATION] ?? '']);
    case 'HTTPRoute':
      // The creation time orders routes; the status is the watcher's own output, not an input.
      return JSON.stringify([value.spec, value.metadata.creationTimestamp ?? '']);
    default:
      return JSON.stringify(value.spec);
  }
}

/**
 * Kinds whose latest version (valid or not) the watcher reports on from the reconciler (ModelServers: their engine
 * credential condition).
 */
const OBSERVED = new Set<string>(['ExternalModelProvider', 'HTTPRoute', 'ModelServer']);

/**
 * The last valid version of every object the watcher reads. A version that fails libs/crd validation is logged,
 * counted and reported (status condition), and the previous valid version stays in force, so a bad edit never
 * empties a live pool. Calls `onChange` only when something that matters downstream changed. Credential Secrets
 * and Namespace labels are kept alongside (not validated: nothing Triad defines).
 */
export class Inventory {
  readonly secrets = new SecretStore();
  readonly #objects = new Map<ValidatedKind, ByNamespace>(VALIDATED_KINDS.map((k) => [k, new Map()]));
  readonly #namespaceLabels = new Map<string, Record<string, string>>();
  /** `kind/ns/name` → problems of the latest (invalid) version. */
  readonly #rejected = new Map<string, string>();
  readonly #rejectedProblems = new Map<string, readonly ValidationProblem[]>();
  /** `kind/ns/name` → generation and status of the latest version, for kinds the reconciler reports on. */
  readonly #observed = new Map<string, ObservedObject>();
  readonly #logger: Logger;
  readonly #metrics: WatcherMetrics | undefined;
  readonly #status: StatusReporter | undefined;
  readonly #onChange: (c: InventoryChange) => void;
  readonly #onReject: ((c: InventoryChange) => void) | undefined;
  readonly #warned = new Map<string, string>();

  /**
   * `onChange`: an object that matters downstream changed or left. `onReject`: a new invalid version arrived (the
   * same bad version again, on a resync or status write, is not reported twice).
   */
  constructor(options: {
    logger: Logger;
    metrics?: WatcherMetrics;
    status?: StatusReporter;
    onChange: (c: InventoryChange) => void;
    onReject?: (c: InventoryChange) => void;
  }) {
    this.#logger = options.logger;
    this.#metrics = options.metrics;
    this.#status = options.status;
    this.#onChange = options.onChange;
    this.#onReject = options.onReject;
  }

  /** Takes a new or changed object as the source delivered it. */
  upsert(raw: unknown): void {
    const kindOf = (raw as { kind?: unknown } | undefined)?.kind;
    if (kindOf === 'Secret' || kindOf === 'Namespace') {
      this.#upsertPlain(kindOf, raw);
      return;
    }
    const v = validateResource(raw);
    if (v.status === 'skipped') return;
    const kind = v.kind as ValidatedKind;
    this.#metrics?.sourceEvents.inc({ kind: VALIDATED_KINDS.includes(kind) ? kind : 'other', type: 'upsert' });
    const ns = v.namespace ?? 'default';
    if (v.name && OBSERVED.has(kind)) this.#observe(kind, ns, v.name, raw);
    if (v.name) this.#warn(kind, ns, v.name, v.warnings);
    if (v.status === 'invalid') {
      this.#reject(v.kind, v.namespace, v.name, v.problems, raw);
      return;
    }
    const id = `${v.kind}/${v.namespace}/${v.name}`;
    this.#rejectedProblems.delete(id);
    const wasRejected = this.#rejected.delete(id);
    if (wasRejected) this.#logger.info({ kind: v.kind, namespace: v.namespace, name: v.name }, 'object is valid again');
    const value = v.value;
    if (value.kind === 'ModelServer' || value.kind === 'ModelRoute') this.#status?.report(value.kind, v.namespace, v.name, [], raw);
    // A kind the reconciler reports on changes when it turns valid again, even with the spec it had before.
    this.#store(value.kind, value, fingerprint(value), wasRejected && OBSERVED.has(value.kind));
  }

  /** The object is gone from the source (deleted, or no longer in the file). */
  remove(kind: WatchedKind, namespace: string, name: string): void {
    this.#metrics?.sourceEvents.inc({ kind, type: 'delete' });
    const id = `${kind}/${namespace}/${name}`;
    this.#rejected.delete(id);
    this.#rejectedProblems.delete(id);
    this.#observed.delete(id);
    this.#warned.delete(id);
    if (kind === 'Secret') {
      if (this.secrets.remove(namespace, name)) this.#onChange({ kind, namespace, name });
      return;
    }
    if (kind === 'Namespace') {
      if (this.#namespaceLabels.delete(name)) this.#onChange({ kind, namespace: name, name });
      return;
    }
    if (kind === 'ModelServer' || kind === 'ModelRoute' || kind === 'ExternalModelProvider' || kind === 'HTTPRoute') {
      this.#status?.forget(kind, namespace, name);
    }
    const map = this.#objects.get(kind) as ByNamespace;
    const ns = map.get(namespace);
    if (!ns?.delete(name)) {
      // An object that only ever had invalid versions still matters to whoever reported on it.
      if (OBSERVED.has(kind)) this.#onChange({ kind, namespace, name });
      return;
    }
    if (ns.size === 0) map.delete(namespace);
    this.#onChange({ kind, namespace, name });
  }

  /** Objects of a kind in their last valid version (one namespace, or all). */
  list<K extends ValidatedKind>(kind: K, namespace?: string): KindTypes[K][] {
    const map = this.#objects.get(kind) as ByNamespace;
    if (namespace !== undefined) return [...(map.get(namespace)?.values() ?? [])].map((e) => e.value as KindTypes[K]);
    const out: KindTypes[K][] = [];
    for (const ns of map.values()) for (const e of ns.values()) out.push(e.value as KindTypes[K]);
    return out;
  }

  get<K extends ValidatedKind>(kind: K, namespace: string, name: string): KindTypes[K] | undefined {
    return this.#objects.get(kind)?.get(namespace)?.get(name)?.value as KindTypes[K] | undefined;
  }

  modelServers(namespace?: string): ModelServer[] {
    return this.list('ModelServer', namespace);
  }

  modelRoutes(namespace?: string): ModelRoute[] {
    return this.list('ModelRoute', namespace);
  }

  pods(namespace: string): Pod[] {
    return this.list('Pod', namespace);
  }

  modelServer(namespace: string, name: string): ModelServer | undefined {
    return this.get('ModelServer', namespace, name);
  }

  pod(namespace: string, name: string): Pod | undefined {
    return this.get('Pod', namespace, name);
  }

  modelRoute(namespace: string, name: string): ModelRoute | undefined {
    return this.get('ModelRoute', namespace, name);
  }

  /** Labels of a namespace, when the source delivers Namespaces (Gateway API mode, cluster-wide). */
  namespaceLabels(name: string): Readonly<Record<string, string>> | undefined {
    return this.#namespaceLabels.get(name);
  }

  /** Generation and status of the latest version of an ExternalModelProvider, HTTPRoute or ModelServer, valid or not. */
  observed(kind: 'ExternalModelProvider' | 'HTTPRoute' | 'ModelServer', namespace: string, name: string): ObservedObject | undefined {
    return this.#observed.get(`${kind}/${namespace}/${name}`);
  }

  /** Problems of the latest version when it is invalid (the last valid one, if any, is still in force). */
  problems(kind: ValidatedKind, namespace: string, name: string): readonly ValidationProblem[] | undefined {
    return this.#rejectedProblems.get(`${kind}/${namespace}/${name}`);
  }

  /** True when `kind/namespace/name` exists in its last valid version. */
  has(kind: ValidatedKind, namespace: string, name: string): boolean {
    return this.#objects.get(kind)?.get(namespace)?.has(name) ?? false;
  }

  /** Valid objects in force, by kind. */
  counts(): Record<WatchedKind, number> {
    const count = (m: ByNamespace) => [...m.values()].reduce((n, ns) => n + ns.size, 0);
    const out = Object.fromEntries(VALIDATED_KINDS.map((k) => [k, count(this.#objects.get(k) as ByNamespace)])) as Record<
      WatchedKind,
      number
    >;
    out.Secret = this.secrets.size;
    out.Namespace = this.#namespaceLabels.size;
    return out;
  }

  /** Objects whose latest version is invalid, by kind. */
  invalidCounts(): Record<ValidatedKind, number> {
    const out = Object.fromEntries(VALIDATED_KINDS.map((k) => [k, 0])) as Record<ValidatedKind, number>;
    for (const id of this.#rejected.keys()) {
      const kind = id.slice(0, id.indexOf('/')) as ValidatedKind;
      if (kind in out) out[kind] += 1;
    }
    return out;
  }

  #upsertPlain(kind: 'Secret' | 'Namespace', raw: unknown): void {
    this.#metrics?.sourceEvents.inc({ kind, type: 'upsert' });
    const meta = ((raw as { metadata?: unknown }).metadata ?? {}) as { name?: unknown; namespace?: unknown; labels?: unknown };
    const name = typeof meta.name === 'string' ? meta.name : '';
    if (!name) return;
    if (kind === 'Secret') {
      const namespace = typeof meta.namespace === 'string' && meta.namespace !== '' ? meta.namespace : 'default';
      if (this.secrets.put(raw)) this.#onChange({ kind, namespace, name });
      return;
    }
    const labels = meta.labels && typeof meta.labels === 'object' ? (meta.labels as Record<string, string>) : {};
    const prev = this.#namespaceLabels.get(name);
    this.#namespaceLabels.set(name, labels);
    if (JSON.stringify(prev) !== JSON.stringify(labels)) this.#onChange({ kind, namespace: name, name });
  }

  #observe(kind: string, namespace: string, name: string, raw: unknown): void {
    const r = raw as { metadata?: { generation?: unknown }; status?: unknown };
    const generation = typeof r.metadata?.generation === 'number' ? r.metadata.generation : undefined;
    this.#observed.set(`${kind}/${namespace}/${name}`, { ...(generation !== undefined ? { generation } : {}), status: r.status });
  }

  /** Fields the API server would drop or require: said once per distinct set (a file source has no API server). */
  #warn(kind: string, namespace: string, name: string, warnings: readonly ValidationProblem[]): void {
    const id = `${kind}/${namespace}/${name}`;
    const text = warnings.map(formatProblem).join('; ');
    if (text === (this.#warned.get(id) ?? '')) return;
    this.#warned.set(id, text);
    if (text) this.#logger.warn({ kind, namespace, name, warnings: text }, 'object has warnings');
  }

  #store(kind: ValidatedKind, value: { metadata: { namespace: string; name: string } }, print: string, force: boolean): void {
    const { namespace, name } = value.metadata;
    const map = this.#objects.get(kind) as ByNamespace;
    let ns = map.get(namespace);
    if (!ns) map.set(namespace, (ns = new Map()));
    const prev = ns.get(name);
    ns.set(name, { value, fingerprint: print });
    if (prev?.fingerprint !== print || force) this.#onChange({ kind, namespace, name });
  }

  #reject(
    kind: string,
    namespace: string | undefined,
    name: string | undefined,
    problems: readonly ValidationProblem[],
    raw: unknown,
  ): void {
    this.#metrics?.rejections.inc({ kind: VALIDATED_KINDS.includes(kind as ValidatedKind) ? kind : 'other' });
    const text = problems.map(formatProblem).join('; ');
    if (!name) {
      this.#logger.warn({ kind, namespace, problems: text }, 'rejected an object without a usable name');
      this.#onReject?.({ kind: kind as WatchedKind, namespace: namespace ?? 'default', name: '' });
      return;
    }
    const ns = namespace ?? 'default';
    const id = `${kind}/${ns}/${name}`;
    const inForce = this.has(kind as ValidatedKind, ns, name);
    this.#rejectedProblems.set(id, problems);
    // The same bad version arrives again on every resync or status write; say it once.
    if (this.#rejected.get(id) !== text) {
      this.#logger.warn({ kind, namespace: ns, name, problems: text, lastValidInForce: inForce }, 'rejected invalid object');
      this.#onReject?.({ kind: kind as WatchedKind, namespace: ns, name });
    }
    this.#rejected.set(id, text);
    if (kind === 'ModelServer' || kind === 'ModelRoute') this.#status?.report(kind, ns, name, problems, raw);
  }
}
