import { randomUUID } from 'node:crypto';

/** A Kubernetes object as the fake API server stores it (any kind; only metadata is interpreted). */
export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    resourceVersion?: string;
    generation?: number;
    uid?: string;
    creationTimestamp?: string;
    deletionTimestamp?: string;
    [key: string]: unknown;
  };
  spec?: unknown;
  status?: unknown;
  [key: string]: unknown;
}

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED';

/** One change, as a watch stream delivers it. `rv` is the object's resourceVersion after the change. */
export interface StoredEvent {
  readonly rv: number;
  readonly type: WatchEventType;
  readonly collection: string;
  readonly object: KubeObject;
  /** Labels of the object before a MODIFIED change (a selector watch turns a change across it into ADDED/DELETED). */
  readonly previousLabels?: Record<string, string>;
}

/** `api/v1/pods` or `apis/<group>/<version>/<plural>`: where a kind's objects live in the REST tree. */
export function collectionOf(apiVersion: string, kind: string): string {
  const plural = `${kind.toLowerCase()}s`;
  return apiVersion.includes('/') ? `apis/${apiVersion}/${plural}` : `api/${apiVersion}/${plural}`;
}

const copy = <T>(v: T): T => JSON.parse(JSON.stringify(v)) as T;
const objectId = (collection: string, namespace: string | undefined, name: string): string => `${collection}|${namespace ?? ''}|${name}`;

/**
 * Objects plus an etcd-like change log: one cluster-wide resourceVersion counter, every change kept until
 * `compact()`, so a watch can resume from any resourceVersion after the last compaction (else 410 Gone).
 */
export class ObjectStore {
  readonly #objects = new Map<string, KubeObject>();
  readonly #kinds = new Map<string, { apiVersion: string; kind: string }>();
  #events: StoredEvent[] = [];
  #rv = 1;
  #compactedRv = 0;
  readonly #listeners = new Set<(e: StoredEvent) => void>();

  get resourceVersion(): number {
    return this.#rv;
  }

  /** Changes at or before this resourceVersion are forgotten; watches starting there get 410 Gone. */
  get compactedResourceVersion(): number {
    return this.#compactedRv;
  }

  /** Kind and apiVersion of a collection once any object of it was stored. */
  kindOf(collection: string): { apiVersion: string; kind: string } | undefined {
    return this.#kinds.get(collection);
  }

  onEvent(listener: (e: StoredEvent) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  get(collection: string, namespace: string | undefined, name: string): KubeObject | undefined {
    const o = this.#objects.get(objectId(collection, namespace, name));
    return o && copy(o);
  }

  list(collection: string, namespace?: string): KubeObject[] {
    const out: KubeObject[] = [];
    for (const o of this.#objects.values()) {
      if (collectionOf(o.apiVersion, o.kind) !== collection) continue;
      if (namespace !== undefined && o.metadata.namespace !== namespace) continue;
      out.push(copy(o));
    }
    return out;
  }

  /** Events after `sinceRv` in one collection (optionally one namespace). */
  eventsSince(collection: string, sinceRv: number, namespace?: string): StoredEvent[] {
    return this.#events.filter(
      (e) => e.rv > sinceRv && e.collection === collection && (namespace === undefined || e.object.metadata.namespace === namespace),
    );
  }

  /**
   * Creates or replaces an object. Server-owned metadata (uid, creationTimestamp, generation, resourceVersion) is
   * kept or assigned; `generation` goes up when `spec` changes; a replacement without `status` keeps the stored
   * status, as a write to a resource with a status subresource does.
   */
  put(input: KubeObject): KubeObject {
    const collection = collectionOf(input.apiVersion, input.kind);
    const id = objectId(collection, input.metadata.namespace, input.metadata.name);
    const prev = this.#objects.get(id);
    const obj = copy(input);
    obj.metadata.uid = prev?.metadata.uid ?? obj.metadata.uid ?? randomUUID();
    obj.metadata.creationTimestamp = prev?.metadata.creationTimestamp ?? obj.metadata.creationTimestamp ?? new Date().toISOString();
    const specChanged = !prev || JSON.stringify(prev.spec) !== JSON.stringify(obj.spec);
    obj.metadata.generation = (prev?.metadata.generation ?? 0) + (specChanged ? 1 : 0);
    if (prev && !('status' in input) && prev.status !== undefined) obj.status = copy(prev.status);
    return this.#commit(collection, id, obj, prev ? 'MODIFIED' : 'ADDED', prev?.metadata.labels);
  }

  /** Stores a modified copy of an existing object (status writes, patches) without touching generation rules. */
  replaceExisting(obj: KubeObject, bumpGeneration: boolean): KubeObject {
    const collection = collectionOf(obj.apiVersion, obj.kind);
    const id = objectId(collection, obj.metadata.namespace, obj.metadata.name);
    const prev = this.#objects.get(id);
    if (!prev) throw new Error(`${obj.kind} ${obj.metadata.name} does not exist`);
    const next = copy(obj);
    next.metadata.uid = prev.metadata.uid;
    next.metadata.creationTimestamp = prev.metadata.creationTimestamp;
    next.metadata.generation = (prev.metadata.generation ?? 1) + (bumpGeneration ? 1 : 0);
    return this.#commit(collection, id, next, 'MODIFIED', prev.metadata.labels);
  }

  remove(collection: string, namespace: string | undefined, name: string): KubeObject | undefined {
    const id = objectId(collection, namespace, name);
    const prev = this.#objects.get(id);
    if (!prev) return undefined;
    this.#objects.delete(id);
    const rv = ++this.#rv;
    const gone = copy(prev);
    gone.metadata.resourceVersion = String(rv);
    this.#record({ rv, type: 'DELETED', collection, object: gone });
    return copy(gone);
  }

  /** Forgets the change log up to now (what etcd compaction does). */
  compact(): void {
    this.#compactedRv = this.#rv;
    this.#events = [];
  }

  #commit(collection: string, id: string, obj: KubeObject, type: WatchEventType, previousLabels?: Record<string, string>): KubeObject {
    const rv = ++this.#rv;
    obj.metadata.resourceVersion = String(rv);
    this.#objects.set(id, obj);
    this.#kinds.set(collection, { apiVersion: obj.apiVersion, kind: obj.kind });
    this.#record({
      rv,
      type,
      collection,
      object: copy(obj),
      ...(type === 'MODIFIED' ? { previousLabels: copy(previousLabels ?? {}) } : {}),
    });
    return copy(obj);
  }

  #record(e: StoredEvent): void {
    this.#events.push(e);
    for (const l of this.#listeners) l(e);
  }
}

/**
 * The event a watch with `selector` sees for a stored event, as the API server's watch cache does: a change that
 * moves an object into the selection is ADDED, out of it DELETED; undefined when the watch sees nothing.
 */
export function selectedEvent(e: StoredEvent, selector: string | null): WatchEventType | undefined {
  const now = matchesSelector(e.object.metadata.labels, selector);
  if (e.type !== 'MODIFIED' || !selector) return now ? e.type : undefined;
  const before = matchesSelector(e.previousLabels, selector);
  if (now) return before ? 'MODIFIED' : 'ADDED';
  return before ? 'DELETED' : undefined;
}

/** Equality-based label selectors (`a=b,c!=d,e,!f`), which is what controllers send. */
export function matchesSelector(labels: Record<string, string> | undefined, selector: string | null): boolean {
  if (!selector) return true;
  return selector
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .every((term) => {
      const ne = term.indexOf('!=');
      if (ne > 0) return labels?.[term.slice(0, ne)] !== term.slice(ne + 2);
      const eq = term.indexOf('=');
      if (eq > 0) return labels?.[term.slice(0, eq)] === term.slice(term[eq + 1] === '=' ? eq + 2 : eq + 1);
      if (term.startsWith('!')) return labels?.[term.slice(1)] === undefined;
      return labels?.[term] !== undefined;
    });
}
