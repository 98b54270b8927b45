import {
  SCHEMA_VERSION,
  inferencePoolServerName,
  objectKey,
  type GatewayRecord,
  type HttpRouteRecord,
  type HttpRouteRuleRecord,
  type ListenerRef,
} from '@triad/bus';
import {
  GATEWAY_API_GROUP,
  httpRouteSupport,
  makeCondition,
  type Condition,
  type Gateway,
  type HttpRoute,
  type InferencePool,
  type ModelRoute,
} from '@triad/crd';
import type { RouteParentStatus } from '../inventory/status-reporter';
import {
  allowsHttpRoutes,
  allowsNamespace,
  hostnamesIntersect,
  isGatewayRef,
  isServedProtocol,
  selectedListeners,
  type ServedGateway,
} from './listeners';
import { TRIAD_CONTROLLER_NAME } from './route-parents';

/** The default Gateway Kthena's router creates in the API server; Triad only publishes it (no write access needed). */
export interface DefaultGateway {
  readonly namespace: string;
  readonly name: string;
  readonly port: number;
}

export interface GatewayApiInput {
  /** GatewayClass names whose Gateways Triad serves. */
  readonly classes: ReadonlySet<string>;
  readonly defaultGateway?: DefaultGateway;
  readonly gateways: readonly Gateway[];
  readonly httpRoutes: readonly HttpRoute[];
  readonly pools: readonly InferencePool[];
  readonly modelRoutes: readonly ModelRoute[];
  /** Labels of a namespace (for `allowedRoutes.namespaces.from: Selector`); undefined when not known. */
  readonly namespaceLabels: (namespace: string) => Readonly<Record<string, string>> | undefined;
  readonly now: Date;
}

/** Everything Gateway API mode publishes and reports, derived from the objects alone. */
export interface GatewayApiModel {
  readonly gateways: ReadonlyMap<string, GatewayRecord>;
  readonly httpRoutes: ReadonlyMap<string, HttpRouteRecord>;
  /** `ns/name` of each HTTPRoute that names one of Triad's Gateways → Triad's `status.parents` entries. */
  readonly routeParents: ReadonlyMap<string, readonly RouteParentStatus[]>;
  /** `ns/name` of each ModelRoute → the listeners it is attached to. */
  readonly modelRouteListeners: ReadonlyMap<string, readonly ListenerRef[]>;
}

function servedGateways(input: GatewayApiInput): Map<string, ServedGateway> {
  const out = new Map<string, ServedGateway>();
  const d = input.defaultGateway;
  if (d) {
    out.set(`${d.namespace}/${d.name}`, {
      namespace: d.namespace,
      name: d.name,
      gatewayClassName: '(default)',
      virtual: true,
      listeners: [{ name: 'default', port: d.port, protocol: 'HTTP', allowedRoutes: { namespaces: { from: 'All' } } }],
    });
  }
  // A real Gateway of the same name replaces the default one.
  for (const g of input.gateways) {
    if (!input.classes.has(g.spec.gatewayClassName)) continue;
    out.set(`${g.metadata.namespace}/${g.metadata.name}`, {
      namespace: g.metadata.namespace,
      name: g.metadata.name,
      gatewayClassName: g.spec.gatewayClassName,
      virtual: false,
      listeners: g.spec.listeners,
    });
  }
  return out;
}

function gatewayRecord(gw: ServedGateway): GatewayRecord {
  return {
    schemaVersion: SCHEMA_VERSION,
    namespace: gw.namespace,
    name: gw.name,
    gatewayClassName: gw.gatewayClassName,
    virtual: gw.virtual,
    listeners: gw.listeners
      .filter(isServedProtocol)
      .map((l) => ({ name: l.name, port: l.port, ...(l.hostname ? { hostname: l.hostname } : {}) })),
    ignoredListeners: gw.listeners
      .filter((l) => !isServedProtocol(l))
      .map((l) => ({ name: l.name, protocol: l.protocol, reason: `protocol ${l.protocol} is not served (HTTP only)` })),
  };
}

/** The `Accepted` condition of one parentRef, and the listeners it attaches to. */
function attach(gw: ServedGateway, route: HttpRoute, ref: NonNullable<HttpRoute['spec']['parentRefs']>[number], input: GatewayApiInput) {
  const selected = selectedListeners(gw, ref);
  const routeNs = route.metadata.namespace;
  const allowed = selected.filter((l) => allowsHttpRoutes(l) && allowsNamespace(l, gw.namespace, routeNs, input.namespaceLabels));
  const hosts = allowed.filter((l) => hostnamesIntersect(l.hostname, route.spec.hostnames ?? []));
  const served = hosts.filter(isServedProtocol);
  const refused = (reason: string, message: string) =>
    makeCondition('Accepted', false, reason, message, route.metadata.generation, input.now);
  let accepted: Condition;
  if (selected.length === 0)
    accepted = refused('NoMatchingParent', `no listener of Gateway ${gw.namespace}/${gw.name} matches sectionName/port`);
  else if (allowed.length === 0)
    accepted = refused('NotAllowedByListeners', 'the selected listeners do not allow this route (allowedRoutes kinds or namespaces)');
  else if (hosts.length === 0) accepted = refused('NoMatchingListenerHostname', 'no listener hostname intersects the route hostnames');
  else if (served.length === 0)
    accepted = refused('UnsupportedValue', 'the selected listeners are not HTTP; Triad serves HTTP listeners only');
  else
    accepted = makeCondition(
      'Accepted',
      true,
      'Accepted',
      `attached to listener ${served.map((l) => l.name).join(', ')}`,
      route.metadata.generation,
      input.now,
    );
  return { accepted, listeners: served };
}

function routeModel(route: HttpRoute, gateways: Map<string, ServedGateway>, pools: Map<string, InferencePool>, input: GatewayApiInput) {
  const ns = route.metadata.namespace;
  const support = httpRouteSupport(route.spec, ns);
  const gen = route.metadata.generation;
  const backendIds = support.rules.flatMap((r) => r.backends).map((b) => `${b.namespace}/${b.name}`);
  const missing = [...new Set(backendIds.filter((id) => !pools.has(id)))];
  const invalidKind = support.unsupported.filter((u) => u.reason === 'InvalidKind');
  const resolved =
    invalidKind.length > 0
      ? makeCondition('ResolvedRefs', false, 'InvalidKind', invalidKind.map((u) => `${u.path}: ${u.message}`).join('; '), gen, input.now)
      : missing.length > 0
        ? makeCondition('ResolvedRefs', false, 'BackendNotFound', `InferencePool ${missing.join(', ')} not found`, gen, input.now)
        : makeCondition('ResolvedRefs', true, 'ResolvedRefs', 'all backends resolved', gen, input.now);
  const dropped = support.unsupported.filter((u) => u.reason === 'UnsupportedValue');
  const droppedText = dropped.map((u) => `${u.path}: ${u.message}`).join('; ');
  const partial = dropped.length > 0 ? [makeCondition('PartiallyInvalid', true, 'UnsupportedValue', droppedText, gen, input.now)] : [];
  const parents: HttpRouteRecord['parents'] = [];
  const statuses: RouteParentStatus[] = [];
  for (const ref of route.spec.parentRefs ?? []) {
    if (!isGatewayRef(ref)) continue;
    const gwNs = ref.namespace ?? ns;
    const gw = gateways.get(`${gwNs}/${ref.name}`);
    if (!gw) continue; // Not one of Triad's Gateways: its own controller reports on it.
    const { accepted, listeners } = attach(gw, route, ref, input);
    for (const l of listeners) parents.push({ namespace: gw.namespace, gateway: gw.name, listener: l.name, port: l.port });
    const parentRef = {
      group: ref.group ?? GATEWAY_API_GROUP,
      kind: ref.kind ?? 'Gateway',
      namespace: gwNs,
      name: ref.name,
      ...(ref.sectionName !== undefined ? { sectionName: ref.sectionName } : {}),
      ...(ref.port !== undefined ? { port: ref.port } : {}),
    };
    statuses.push({ parentRef, controllerName: TRIAD_CONTROLLER_NAME, conditions: [accepted, resolved, ...partial] });
  }
  const rules: HttpRouteRuleRecord[] = support.rules.map((r) => ({
    index: r.index,
    ...(r.name ? { name: r.name } : {}),
    matches: [...r.matches],
    backends: r.backends.flatMap((b) => {
      const pool = pools.get(`${b.namespace}/${b.name}`);
      if (!pool) return [];
      const port = pool.spec.targetPorts[0].number;
      return [{ namespace: b.namespace, name: b.name, weight: b.weight, modelServer: inferencePoolServerName(b.name), port }];
    }),
    ...(r.urlRewrite ? { urlRewrite: r.urlRewrite } : {}),
  }));
  const record: HttpRouteRecord | undefined =
    parents.length === 0
      ? undefined
      : {
          schemaVersion: SCHEMA_VERSION,
          namespace: ns,
          name: route.metadata.name,
          ...(route.metadata.creationTimestamp ? { creationTimestamp: route.metadata.creationTimestamp } : {}),
          hostnames: [...(route.spec.hostnames ?? [])],
          parents,
          rules,
        };
  return { record, statuses };
}

/**
 * ModelRoute attachment, Kthena's rule: with parentRefs, the listeners of Triad's Gateways they select (a
 * `sectionName` must name an existing listener); without, every listener of the Gateways in the route's own
 * namespace. Listener `allowedRoutes` do not apply to ModelRoutes (Kthena does not check them either).
 */
function modelRouteListeners(route: ModelRoute, gateways: Map<string, ServedGateway>): ListenerRef[] {
  const ns = route.metadata.namespace;
  const refs = route.spec.parentRefs ?? [];
  const out: ListenerRef[] = [];
  if (refs.length === 0) {
    for (const gw of gateways.values()) {
      if (gw.namespace !== ns) continue;
      for (const l of gw.listeners.filter(isServedProtocol))
        out.push({ namespace: gw.namespace, gateway: gw.name, listener: l.name, port: l.port });
    }
    return out;
  }
  const seen = new Set<string>();
  for (const ref of refs) {
    if (!isGatewayRef(ref)) continue;
    const gw = gateways.get(`${ref.namespace ?? ns}/${ref.name}`);
    if (!gw) continue;
    for (const l of selectedListeners(gw, ref).filter(isServedProtocol)) {
      const id = `${gw.namespace}/${gw.name}/${l.name}`;
      if (seen.has(id)) continue;
      seen.add(id);
      out.push({ namespace: gw.namespace, gateway: gw.name, listener: l.name, port: l.port });
    }
  }
  return out;
}

/** Derives the Gateway API records and statuses from the watched objects (pure; recomputed on any change). */
export function buildGatewayApiModel(input: GatewayApiInput): GatewayApiModel {
  const gateways = servedGateways(input);
  const pools = new Map(input.pools.map((p) => [`${p.metadata.namespace}/${p.metadata.name}`, p]));
  const gatewayRecords = new Map([...gateways.values()].map((g) => [objectKey(g.namespace, g.name), gatewayRecord(g)]));
  const httpRoutes = new Map<string, HttpRouteRecord>();
  const routeParents = new Map<string, RouteParentStatus[]>();
  for (const route of input.httpRoutes) {
    const { record, statuses } = routeModel(route, gateways, pools, input);
    if (record) httpRoutes.set(objectKey(route.metadata.namespace, route.metadata.name), record);
    if (statuses.length > 0) routeParents.set(`${route.metadata.namespace}/${route.metadata.name}`, statuses);
  }
  const listeners = new Map(input.modelRoutes.map((r) => [`${r.metadata.namespace}/${r.metadata.name}`, modelRouteListeners(r, gateways)]));
  return { gateways: gatewayRecords, httpRoutes, routeParents, modelRouteListeners: listeners };
}
