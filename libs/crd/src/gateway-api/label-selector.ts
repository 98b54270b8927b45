import type { LabelSelector } from './schemas';

/**
 * Whether labels satisfy a `metav1.LabelSelector` (all matchLabels and every matchExpression). An empty
 * selector matches everything, as in Kubernetes.
 */
export function matchesLabelSelector(labels: Readonly<Record<string, string>> | undefined, selector: LabelSelector): boolean {
  const own = labels ?? {};
  for (const [k, v] of Object.entries(selector.matchLabels ?? {})) if (own[k] !== v) return false;
  for (const req of selector.matchExpressions ?? []) {
    const has = Object.hasOwn(own, req.key);
    const values = req.values ?? [];
    switch (req.operator) {
      case 'In':
        if (!has || !values.includes(own[req.key])) return false;
        break;
      case 'NotIn':
        if (has && values.includes(own[req.key])) return false;
        break;
      case 'Exists':
        if (!has) return false;
        break;
      case 'DoesNotExist':
        if (has) return false;
        break;
    }
  }
  return true;
}
