import { endpointKey } from '@triad/bus';
import type { ModelServer, Pod } from '@triad/crd';
import { placePods, samePlacement, type Placement } from './placement';

export interface PlacementDiff {
  /** New placements and placements whose role, group, address or engine changed. */
  readonly upserted: readonly Placement[];
  /** Placements that no longer exist (pod gone, unready, relabelled out, selector changed, ModelServer gone). */
  readonly removed: readonly Placement[];
}

/**
 * Every current placement, recomputed per namespace: a change to any pod or ModelServer of a namespace
 * reclassifies that whole namespace and reports the difference, so no earlier classification can linger.
 */
export class EndpointTable {
  readonly #byNamespace = new Map<string, Map<string, Placement>>();
  readonly #byKey = new Map<string, Placement>();

  /** Recomputes one namespace from its current ModelServers and pods. */
  recompute(namespace: string, servers: readonly ModelServer[], pods: readonly Pod[]): PlacementDiff {
    const next = new Map<string, Placement>();
    for (const ms of servers) for (const p of placePods(ms, pods)) next.set(p.key, p);
    const prev = this.#byNamespace.get(namespace) ?? new Map<string, Placement>();
    const upserted: Placement[] = [];
    const removed: Placement[] = [];
    for (const [key, p] of next) {
      const old = prev.get(key);
      if (!old || !samePlacement(old, p)) upserted.push(p);
    }
    for (const [key, p] of prev) if (!next.has(key)) removed.push(p);
    for (const p of removed) this.#byKey.delete(p.key);
    for (const p of upserted) this.#byKey.set(p.key, p);
    if (next.size > 0) this.#byNamespace.set(namespace, next);
    else this.#byNamespace.delete(namespace);
    return { upserted, removed };
  }

  /**
   * Reclassifies only the given pods of a namespace (undefined = the pod is gone) against its ModelServers: what
   * a pod event needs, in time proportional to the ModelServers rather than to every pod of the namespace. Only
   * valid while the namespace's ModelServers are unchanged since its last full `recompute` (a ModelServer change
   * takes the full path).
   */
  recomputePods(namespace: string, servers: readonly ModelServer[], pods: ReadonlyMap<string, Pod | undefined>): PlacementDiff {
    let current = this.#byNamespace.get(namespace);
    if (!current) this.#byNamespace.set(namespace, (current = new Map()));
    const upserted: Placement[] = [];
    const removed: Placement[] = [];
    for (const [name, pod] of pods) {
      const next = new Map<string, Placement>();
      if (pod) for (const ms of servers) for (const p of placePods(ms, [pod])) next.set(p.key, p);
      for (const ms of servers) {
        const key = endpointKey(namespace, ms.metadata.name, name);
        const old = current.get(key);
        const now = next.get(key);
        if (old && !now) {
          removed.push(old);
          current.delete(key);
          this.#byKey.delete(key);
        } else if (now && (!old || !samePlacement(old, now))) {
          upserted.push(now);
          current.set(key, now);
          this.#byKey.set(key, now);
        }
      }
    }
    if (current.size === 0) this.#byNamespace.delete(namespace);
    return { upserted, removed };
  }

  get(key: string): Placement | undefined {
    return this.#byKey.get(key);
  }

  all(): Placement[] {
    return [...this.#byKey.values()];
  }

  /** Placements of one ModelServer. */
  ofModelServer(namespace: string, name: string): Placement[] {
    return [...(this.#byNamespace.get(namespace)?.values() ?? [])].filter((p) => p.modelServer === name);
  }

  get size(): number {
    return this.#byKey.size;
  }

  /** Placement counts by role (for the endpoints gauge). */
  countByRole(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const ns of this.#byNamespace.values()) for (const p of ns.values()) out[p.role] = (out[p.role] ?? 0) + 1;
    return out;
  }
}
