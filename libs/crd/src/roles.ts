import { z } from 'zod';
import { resolvePipelineMode, type ModelServerSpec } from './model-server';

/** The role a pod plays for one ModelServer. */
export const RoleSchema = z.enum(['encode', 'prefill', 'decode', 'aggregated']);
export type Role = z.infer<typeof RoleSchema>;

/** Result of classifying one pod against one ModelServer. */
export interface PodClassification {
  /** The pod's role, or `none` when it does not serve this ModelServer (see `reason`). */
  readonly role: Role | 'none';
  /** Value of the pod's `groupKey` label (PD group); undefined for aggregated pods and ungrouped encoders. */
  readonly group?: string;
  /** Why the pod has no role. */
  readonly reason?: string;
  /** Set when the labels match more than one role; the role then follows Kthena's precedence (decode first). */
  readonly ambiguousRoles?: readonly Role[];
}

/** True when every selector label is present on the pod with the same value (an empty selector matches nothing). */
export function matchesLabels(
  labels: Readonly<Record<string, string>> | undefined,
  selector: Readonly<Record<string, string>> | undefined,
): boolean {
  if (!selector) return false;
  const entries = Object.entries(selector);
  if (entries.length === 0) return false;
  return entries.every(([k, v]) => labels?.[k] === v);
}

/**
 * Classifies a pod for a ModelServer, from its labels alone. The pod must match `workloadSelector.matchLabels`.
 * Disaggregated modes check decode, then prefill, then encode labels (Kthena checks decode first); prefill and
 * decode pods need the `groupKey` label, encode pods may omit it to serve every group.
 */
export function classifyPod(
  spec: Pick<ModelServerSpec, 'pipelineMode' | 'workloadSelector'>,
  labels: Readonly<Record<string, string>> | undefined,
): PodClassification {
  if (!matchesLabels(labels, spec.workloadSelector.matchLabels))
    return {
      role: 'none',
      reason: 'labels do not match workloadSelector.matchLabels',
    };
  const mode = resolvePipelineMode(spec);
  const pd = spec.workloadSelector.pdGroup;
  if (mode === 'aggregated' || !pd) return { role: 'aggregated' };

  const candidates: [Role, Record<string, string> | undefined][] = [
    ['decode', pd.decodeLabels],
    ['prefill', pd.prefillLabels],
  ];
  if (mode === 'epd') candidates.push(['encode', pd.encodeLabels]);
  const matched = candidates.filter(([, sel]) => matchesLabels(labels, sel)).map(([role]) => role);
  if (matched.length === 0) return { role: 'none', reason: 'labels match no role of pdGroup' };

  const role = matched[0];
  const group = labels?.[pd.groupKey] || undefined;
  const ambiguous = matched.length > 1 ? { ambiguousRoles: matched } : {};
  if (group === undefined && role !== 'encode') {
    return { role: 'none', reason: `${role} pod lacks the group label '${pd.groupKey}'`, ...ambiguous };
  }
  return group === undefined ? { role, ...ambiguous } : { role, group, ...ambiguous };
}

/**
 * Pairs of role label sets that one pod could satisfy at once (no shared key with different values), which
 * makes classification depend on precedence rather than intent.
 */
export function overlappingRoleLabels(
  pd: NonNullable<ModelServerSpec['workloadSelector']['pdGroup']>,
  roles: readonly ('encode' | 'prefill' | 'decode')[],
): [string, string][] {
  const sets = roles
    .map((r) => [r, pd[`${r}Labels` as const]] as const)
    .filter((e): e is readonly [(typeof e)[0], Record<string, string>] => !!e[1] && Object.keys(e[1]).length > 0);
  const overlaps: [string, string][] = [];
  for (let i = 0; i < sets.length; i++) {
    for (let j = i + 1; j < sets.length; j++) {
      const [ra, a] = sets[i] as readonly [string, Record<string, string>];
      const [rb, b] = sets[j] as readonly [string, Record<string, string>];
      const conflict = Object.entries(a).some(([k, v]) => k in b && b[k] !== v);
      if (!conflict) overlaps.push([`${ra}Labels`, `${rb}Labels`]);
    }
  }
  return overlaps;
}
