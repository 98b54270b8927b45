/**
 * What of a Pod the pod-watcher keeps: the fields libs/crd's PodSchema reads (identity, labels, annotations,
 * deletion, phase, IP, readiness: the Ready condition alone), nothing of its spec, container statuses or managed
 * fields. Times become ISO strings, as in the API's JSON: the trimmed object is plain data, which the source hands
 * on without another copy of its strings.
 *
 * client-node's informer caches the very object it hands to the event handlers, for as long as the pod exists.
 * A pod as the API server serves it (containers, env, volumes, probes, container statuses, managed fields) is
 * 5-10 KB of JSON and several times that as objects: at 10,000 engines the cache alone would outgrow a replica's
 * memory. Trimming the object in the handler, before anything else sees it, trims the cache: the role of a Go
 * informer's TransformFunc. The object is changed in place (the cache holds this reference); properties are
 * replaced, not deleted, so objects keep their shapes.
 */
import { ObjectMetaSchema } from '@triad/crd';

/**
 * The metadata fields kept: those of libs/crd's ObjectMetaSchema, what Triad reads (among them what the cache needs:
 * name, namespace, resourceVersion).
 */
const KEPT_METADATA = Object.keys(ObjectMetaSchema.shape);

type Loose = Record<string, unknown>;

/** `from`'s `keys` that are set; Dates (client-node's typed lists) as the API's ISO strings. */
function pick(from: Loose, keys: readonly string[]): Loose {
  const out: Loose = {};
  for (const k of keys) {
    const v = from[k];
    if (v !== undefined) out[k] = v instanceof Date ? v.toISOString() : v;
  }
  return out;
}

/** Trims `pod` in place to what Triad reads of it (see the module comment); returns it. */
export function trimCachedPod<T extends object>(pod: T): T {
  const o = pod as Loose;
  if (typeof o['metadata'] === 'object' && o['metadata'] !== null) o['metadata'] = pick(o['metadata'] as Loose, KEPT_METADATA);
  if (o['spec'] !== undefined) o['spec'] = undefined;
  const status = o['status'] as Loose | undefined | null;
  if (typeof status === 'object' && status !== null) {
    const kept = pick(status, ['phase', 'podIP']);
    const conditions = status['conditions'];
    // Readiness is all Triad reads of the conditions (isPodReady in libs/crd).
    if (Array.isArray(conditions)) {
      kept['conditions'] = conditions
        .filter((c: unknown) => typeof c === 'object' && c !== null && (c as Loose)['type'] === 'Ready')
        .map((c: unknown) => pick(c as Loose, ['type', 'status']));
    }
    o['status'] = kept;
  }
  return pod;
}
