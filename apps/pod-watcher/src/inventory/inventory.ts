import {
  formatProblem, isPodReady, validateResource, type ModelRoute, type ModelServer, type Pod, type ValidationProblem,
} from '@triad/crd';
import type { Logger } from '@triad/runtime';
import type { WatcherMetrics } from '../ops/metrics';

export type WatchedKind = 'ModelServer' | 'ModelRoute' | 'Pod';
export const WATCHED_KINDS: readonly WatchedKind[] = ['ModelServer', 'ModelRoute', 'Pod'];

export interface InventoryChange {
  readonly kind: WatchedKind;
  readonly namespace: string;
  readonly name: string;
}

/** Told about every ModelServer/ModelRoute version received, so it can write the `Accepted` condition. */
export interface StatusReporter {
  report(kind: 'ModelServer' | 'ModelRoute', namespace: string, name: string, problems: readonly ValidationProblem[], raw: unknown): void;
  forget(kind: 'ModelServer' | 'ModelRoute', namespace: string, name: string): void;
}

interface Entry<T> {
  readonly value: T;
  /** What of the object matters downstream; an update that leaves it unchanged is not a change. */
  readonly fingerprint: string;
}

type ByNamespace<T> = Map<string, Map<string, Entry<T>>>;

// Only these parts of a pod feed classification and addressing: resourceVersion bumps, container statuses and
// the like must not wake the reconciler.
const podFingerprint = (p: Pod): string => JSON.stringify([
  p.metadata.labels ?? {}, p.metadata.annotations ?? {}, p.status?.podIP ?? '', isPodReady(p),
]);
const specFingerprint = (o: ModelServer | ModelRoute): string => JSON.stringify(o.spec);

/**
 * The last valid version of every ModelServer, ModelRoute and Pod. A version that fails libs/crd validation is
 * logged, counted and reported (status condition), and the previous valid version stays in force, so a bad edit
 * never empties a live pool. Calls `onChange` only when something that matters downstream changed.
 */
export class Inventory {
  readonly #servers: ByNamespace<ModelServer> = new Map();
  readonly #routes: ByNamespace<ModelRoute> = new Map();
  readonly #pods: ByNamespace<Pod> = new Map();
  /** `kind/ns/name` → problems of the latest (invalid) version. */
  readonly #rejected = new Map<string, string>();
  readonly #logger: Logger;
  readonly #metrics: WatcherMetrics | undefined;
  readonly #status: StatusReporter | undefined;
  readonly #onChange: (c: InventoryChange) => void;
  readonly #onReject: ((kind: string) => void) | undefined;

  /**
   * `onChange`: an object that matters downstream changed or left. `onReject`: a new invalid version arrived (the
   * same bad version again, on a resync or status write, is not reported twice).
   */
  constructor(options: {
    logger: Logger;
    metrics?: WatcherMetrics;
    status?: StatusReporter;
    onChange: (c: InventoryChange) => void;
    onReject?: (kind: string) => void;
  }) {
    this.#logger = options.logger;
    this.#metrics = options.metrics;
    this.#status = options.status;
    this.#onChange = options.onChange;
    this.#onReject = options.onReject;
  }

  /** Takes a new or changed object as the source delivered it. */
  upsert(raw: unknown): void {
    const v = validateResource(raw);
    if (v.status === 'skipped') return;
    const kind = v.kind as WatchedKind;
    this.#metrics?.sourceEvents.inc({ kind: WATCHED_KINDS.includes(kind) ? kind : 'other', type: 'upsert' });
    if (v.status === 'invalid') {
      this.#reject(v.kind, v.namespace, v.name, v.problems, raw);
      return;
    }
    const id = `${v.kind}/${v.namespace}/${v.name}`;
    if (this.#rejected.delete(id)) this.#logger.info({ kind: v.kind, namespace: v.namespace, name: v.name }, 'object is valid again');
    const value = v.value;
    switch (value.kind) {
      case 'ModelServer':
        this.#status?.report('ModelServer', v.namespace, v.name, [], raw);
        this.#store(this.#servers, 'ModelServer', value, specFingerprint(value));
        break;
      case 'ModelRoute':
        this.#status?.report('ModelRoute', v.namespace, v.name, [], raw);
        this.#store(this.#routes, 'ModelRoute', value, specFingerprint(value));
        break;
      case 'Pod':
        this.#store(this.#pods, 'Pod', value, podFingerprint(value));
        break;
    }
  }

  /** The object is gone from the source (deleted, or no longer in the file). */
  remove(kind: WatchedKind, namespace: string, name: string): void {
    this.#metrics?.sourceEvents.inc({ kind, type: 'delete' });
    this.#rejected.delete(`${kind}/${namespace}/${name}`);
    if (kind !== 'Pod') this.#status?.forget(kind, namespace, name);
    const map = kind === 'ModelServer' ? this.#servers : kind === 'ModelRoute' ? this.#routes : this.#pods;
    const ns = map.get(namespace);
    if (!ns?.delete(name)) return;
    if (ns.size === 0) map.delete(namespace);
    this.#onChange({ kind, namespace, name });
  }

  modelServers(namespace?: string): ModelServer[] {
    return values(this.#servers, namespace);
  }

  modelRoutes(namespace?: string): ModelRoute[] {
    return values(this.#routes, namespace);
  }

  pods(namespace: string): Pod[] {
    return values(this.#pods, namespace);
  }

  modelServer(namespace: string, name: string): ModelServer | undefined {
    return this.#servers.get(namespace)?.get(name)?.value;
  }

  pod(namespace: string, name: string): Pod | undefined {
    return this.#pods.get(namespace)?.get(name)?.value;
  }

  modelRoute(namespace: string, name: string): ModelRoute | undefined {
    return this.#routes.get(namespace)?.get(name)?.value;
  }

  /** True when `kind/namespace/name` exists in its last valid version. */
  has(kind: WatchedKind, namespace: string, name: string): boolean {
    const map = kind === 'ModelServer' ? this.#servers : kind === 'ModelRoute' ? this.#routes : this.#pods;
    return map.get(namespace)?.has(name) ?? false;
  }

  /** Valid objects in force, by kind. */
  counts(): Record<WatchedKind, number> {
    const count = (m: ByNamespace<unknown>) => [...m.values()].reduce((n, ns) => n + ns.size, 0);
    return { ModelServer: count(this.#servers), ModelRoute: count(this.#routes), Pod: count(this.#pods) };
  }

  /** Objects whose latest version is invalid, by kind. */
  invalidCounts(): Record<WatchedKind, number> {
    const out: Record<WatchedKind, number> = { ModelServer: 0, ModelRoute: 0, Pod: 0 };
    for (const id of this.#rejected.keys()) {
      const kind = id.slice(0, id.indexOf('/')) as WatchedKind;
      if (kind in out) out[kind] += 1;
    }
    return out;
  }

  #store<T>(
    map: ByNamespace<T>, kind: WatchedKind, value: T & { metadata: { namespace: string; name: string } }, fingerprint: string,
  ): void {
    const { namespace, name } = value.metadata;
    let ns = map.get(namespace);
    if (!ns) map.set(namespace, (ns = new Map()));
    const prev = ns.get(name);
    ns.set(name, { value, fingerprint });
    if (prev?.fingerprint !== fingerprint) this.#onChange({ kind, namespace, name });
  }

  #reject(
    kind: string, namespace: string | undefined, name: string | undefined, problems: readonly ValidationProblem[], raw: unknown,
  ): void {
    this.#metrics?.rejections.inc({ kind: WATCHED_KINDS.includes(kind as WatchedKind) ? kind : 'other' });
    const text = problems.map(formatProblem).join('; ');
    if (!name) {
      this.#logger.warn({ kind, namespace, problems: text }, 'rejected an object without a usable name');
      this.#onReject?.(kind);
      return;
    }
    const ns = namespace ?? 'default';
    const id = `${kind}/${ns}/${name}`;
    const inForce = this.has(kind as WatchedKind, ns, name);
    // The same bad version arrives again on every resync or status write; say it once.
    if (this.#rejected.get(id) !== text) {
      this.#logger.warn({ kind, namespace: ns, name, problems: text, lastValidInForce: inForce }, 'rejected invalid object');
      this.#onReject?.(kind);
    }
    this.#rejected.set(id, text);
    if (kind === 'ModelServer' || kind === 'ModelRoute') this.#status?.report(kind, ns, name, problems, raw);
  }
}

function values<T>(map: ByNamespace<T>, namespace?: string): T[] {
  if (namespace !== undefined) return [...(map.get(namespace)?.values() ?? [])].map((e) => e.value);
  const out: T[] = [];
  for (const ns of map.values()) for (const e of ns.values()) out.push(e.value);
  return out;
}
