import { GATEWAY_API_GROUP, matchesLabelSelector, type Listener, type ParentReference } from '@triad/crd';

/** A Gateway as Triad serves it: one of its classes, or the default one the watcher defines. */
export interface ServedGateway {
  readonly namespace: string;
  readonly name: string;
  readonly gatewayClassName: string;
  readonly virtual: boolean;
  readonly listeners: readonly Listener[];
}

/** Only plain HTTP listeners are served (Kthena's rule; HTTPS would need certificates from Secrets). */
export const isServedProtocol = (l: Listener): boolean => l.protocol === 'HTTP';

/** A parentRef to a Gateway (group and kind default to Gateway API's). */
export function isGatewayRef(ref: ParentReference): boolean {
  return (ref.group ?? GATEWAY_API_GROUP) === GATEWAY_API_GROUP && (ref.kind ?? 'Gateway') === 'Gateway';
}

/** The listeners a parentRef selects by `sectionName` and `port`. */
export function selectedListeners(gw: ServedGateway, ref: ParentReference): Listener[] {
  return gw.listeners.filter(
    (l) => (ref.sectionName === undefined || l.name === ref.sectionName) && (ref.port === undefined || l.port === ref.port),
  );
}

/** Whether a listener admits HTTPRoutes (its allowedRoutes kinds, or by default HTTP and HTTPS listeners). */
export function allowsHttpRoutes(l: Listener): boolean {
  const kinds = l.allowedRoutes?.kinds;
  if (!kinds || kinds.length === 0) return l.protocol === 'HTTP' || l.protocol === 'HTTPS';
  return kinds.some((k) => (k.group ?? GATEWAY_API_GROUP) === GATEWAY_API_GROUP && k.kind === 'HTTPRoute');
}

/** Whether a listener admits routes from `routeNamespace` (allowedRoutes.namespaces: Same by default). */
export function allowsNamespace(
  l: Listener,
  gatewayNamespace: string,
  routeNamespace: string,
  labels: (ns: string) => Readonly<Record<string, string>> | undefined,
): boolean {
  const from = l.allowedRoutes?.namespaces?.from ?? 'Same';
  if (from === 'All') return true;
  if (from === 'Same') return gatewayNamespace === routeNamespace;
  const selector = l.allowedRoutes?.namespaces?.selector;
  const nsLabels = labels(routeNamespace);
  return !!selector && !!nsLabels && matchesLabelSelector(nsLabels, selector);
}

function hostMatches(pattern: string, host: string): boolean {
  if (pattern === host) return true;
  if (pattern.startsWith('*.')) return host.endsWith(pattern.slice(1)) && host.length > pattern.length - 1;
  return false;
}

/** Gateway API: a listener hostname and a route's hostnames must intersect (either may be a `*.` wildcard). */
export function hostnamesIntersect(listenerHost: string | undefined, routeHosts: readonly string[]): boolean {
  if (!listenerHost || routeHosts.length === 0) return true;
  return routeHosts.some((h) => hostMatches(listenerHost, h) || hostMatches(h, listenerHost));
}
