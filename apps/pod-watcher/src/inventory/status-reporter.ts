import type { Condition, ValidationProblem } from '@triad/crd';

/** Kinds whose status the watcher writes (kube source only). */
export type StatusKind = 'ModelServer' | 'ModelRoute' | 'ExternalModelProvider' | 'HTTPRoute';

/** The latest version of an object as the source delivered it (valid or not): what its status says now. */
export interface ObservedObject {
  readonly generation?: number;
  readonly status?: unknown;
}

/** One entry of an HTTPRoute's `status.parents` (Gateway API RouteParentStatus). */
export interface RouteParentStatus {
  readonly parentRef: { group: string; kind: string; namespace: string; name: string; sectionName?: string; port?: number };
  readonly controllerName: string;
  readonly conditions: readonly Condition[];
}

/** Where the watcher reports outcomes into objects' status. */
export interface StatusReporter {
  /** The `Accepted` condition of one ModelServer/ModelRoute version. */
  report(kind: 'ModelServer' | 'ModelRoute', namespace: string, name: string, problems: readonly ValidationProblem[], raw: unknown): void;
  /** Conditions the watcher owns on an object (others are kept), and optionally `status.observedGeneration`. */
  conditions(
    kind: StatusKind,
    namespace: string,
    name: string,
    desired: readonly Condition[],
    observed: ObservedObject,
    observedGeneration?: number,
  ): void;
  /** The watcher's entries of an HTTPRoute's `status.parents` (other controllers' entries are kept). */
  routeParents(namespace: string, name: string, parents: readonly RouteParentStatus[], observed: ObservedObject): void;
  forget(kind: StatusKind, namespace: string, name: string): void;
}
