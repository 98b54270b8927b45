import { keepTransitionTime, type Condition } from '@triad/crd';
import type { RouteParentStatus } from '../inventory/status-reporter';

/** The controller name in Triad's HTTPRoute `status.parents` entries. */
export const TRIAD_CONTROLLER_NAME = 'triad.io/gateway-controller';

const refKey = ({ parentRef: r }: RouteParentStatus): string =>
  JSON.stringify([r.group, r.kind, r.namespace, r.name, r.sectionName ?? '', r.port ?? 0]);
const withoutTimes = (conditions: readonly Condition[]) => conditions.map(({ lastTransitionTime: _t, ...rest }) => rest);
const ours = (list: readonly RouteParentStatus[]) => list.filter((p) => p?.controllerName === TRIAD_CONTROLLER_NAME);

/** True when Triad's entries in `current` say something `desired` does not (transition times aside). */
export function routeParentsDiffer(current: readonly RouteParentStatus[], desired: readonly RouteParentStatus[]): boolean {
  const mine = ours(current);
  if (mine.length !== desired.length) return true;
  const byRef = new Map(mine.map((p) => [refKey(p), p]));
  return desired.some((d) => {
    const c = byRef.get(refKey(d));
    return !c || JSON.stringify(withoutTimes(c.conditions ?? [])) !== JSON.stringify(withoutTimes(d.conditions));
  });
}

/**
 * The full `status.parents` list to write: other controllers' entries as they are, Triad's replaced by
 * `desired`, each condition keeping its transition time while its status is unchanged.
 */
export function mergeRouteParents(current: readonly RouteParentStatus[], desired: readonly RouteParentStatus[]): RouteParentStatus[] {
  const previous = new Map(ours(current).map((p) => [refKey(p), p]));
  const others = current.filter((p) => p?.controllerName !== TRIAD_CONTROLLER_NAME);
  const next = desired.map((d) => {
    const prev = previous.get(refKey(d));
    const conditions = d.conditions.map((c) =>
      keepTransitionTime(
        prev?.conditions?.find((x) => x.type === c.type),
        c,
      ),
    );
    return { ...d, conditions };
  });
  return [...others, ...next];
}
