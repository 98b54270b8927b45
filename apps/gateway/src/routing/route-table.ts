import type { ListenerRef, ModelRouteRecord } from '@triad/bus';
import { compileStringMatch, type RateLimit, type RouteRule } from '@triad/crd';
import type { RequestContext } from '@triad/request';

/** The outcome of ModelRoute resolution for one request (the route and the name its rule picked). */
export interface RouteMatch {
  /** `ns/name` of the ModelRoute. */
  readonly route: string;
  readonly namespace: string;
  /** ModelServer name (same namespace as the route); '' when the target is an ExternalModelProvider. */
  readonly modelServer: string;
  /** ExternalModelProvider name (same namespace), when the picked target names one. */
  readonly provider: string | undefined;
  /** The request named a LoRA adapter: its `model` is not rewritten. */
  readonly lora: boolean;
  readonly rule: string | undefined;
}

/** The request facts rules match on. */
type RouteFacts = Pick<RequestContext, 'model' | 'path' | 'headers'>;

type Predicate = (value: string) => boolean;

interface CompiledRule {
  readonly name: string | undefined;
  readonly headers: readonly (readonly [name: string, test: Predicate])[];
  readonly uri: Predicate | undefined;
  readonly bodyModel: string | undefined;
  readonly targets: readonly RuleTarget[];
  readonly totalWeight: number;
}

interface CompiledRoute {
  readonly key: string;
  readonly record: ModelRouteRecord;
  /** Routes with parentRefs attach only to Gateway listeners, which this gateway does not serve (Kthena). */
  readonly gatewayOnly: boolean;
  readonly rules: readonly CompiledRule[];
}

const NEVER: Predicate = () => false;

/** A rule target: a ModelServer or an ExternalModelProvider (exactly one is set, as the CRD requires). */
interface RuleTarget {
  readonly server: string | undefined;
  readonly provider: string | undefined;
  readonly weight: number;
}

function compileRule(rule: RouteRule): CompiledRule {
  const match = rule.modelMatch;
  const compile = (m: Parameters<typeof compileStringMatch>[0]): Predicate => {
    const p = compileStringMatch(m);
    return typeof p === 'string' ? NEVER : p;
  };
  const targets: RuleTarget[] = [];
  for (const t of rule.targetModels) {
    if (t.modelServerName) targets.push({ server: t.modelServerName, provider: undefined, weight: t.weight });
    else if (t.externalModelProviderName) targets.push({ server: undefined, provider: t.externalModelProviderName, weight: t.weight });
  }
  return {
    name: rule.name,
    headers: Object.entries(match?.headers ?? {}).map(([name, m]) => [name.toLowerCase(), compile(m)] as const),
    uri: match?.uri ? compile(match.uri) : undefined,
    bodyModel: match?.body?.model,
    targets,
    totalWeight: targets.reduce((s, t) => s + t.weight, 0),
  };
}

function headerValue(headers: RouteFacts['headers'], name: string): string {
  const v = headers[name];
  return v === undefined ? '' : Array.isArray(v) ? (v[0] ?? '') : v;
}

function ruleMatches(rule: CompiledRule, req: RouteFacts): boolean {
  if (rule.bodyModel !== undefined && rule.bodyModel !== req.model) return false;
  if (rule.uri !== undefined && !rule.uri(req.path)) return false;
  for (const [name, test] of rule.headers) if (!test(headerValue(req.headers, name))) return false;
  return true;
}

/**
 * A weighted pick among the rule's targets; with `accept`, among those it keeps (the first of them when they all
 * weigh 0).
 */
function pickTarget(rule: CompiledRule, random: () => number, accept?: (target: RuleTarget) => boolean): RuleTarget | undefined {
  const targets = accept === undefined ? rule.targets : rule.targets.filter(accept);
  const total = accept === undefined ? rule.totalWeight : targets.reduce((s, t) => s + t.weight, 0);
  // A filtered pick may keep only weight-0 targets (e.g. an aggregated ModelServer kept for calls PD cannot serve).
  if (total <= 0) return accept === undefined ? undefined : targets[0];
  let r = random() * total;
  for (const t of targets) {
    if (r < t.weight) return t;
    r -= t.weight;
  }
  return targets[targets.length - 1];
}

function attached(record: ModelRouteRecord, l: ListenerRef): boolean {
  return record.listeners?.some((x) => x.namespace === l.namespace && x.gateway === l.gateway && x.listener === l.listener) ?? false;
}

function compareResourceVersion(a: string, b: string): number {
  if (/^\d+$/.test(a) && /^\d+$/.test(b)) return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Kthena's candidate order: oldest creationTimestamp first (missing = zero time), then resourceVersion, then ns/name. */
function olderFirst(a: CompiledRoute, b: CompiledRoute): number {
  const ta = a.record.creationTimestamp ?? '';
  const tb = b.record.creationTimestamp ?? '';
  if (ta !== tb) return Date.parse(ta || '1970-01-01T00:00:00Z') - Date.parse(tb || '1970-01-01T00:00:00Z') || (ta < tb ? -1 : 1);
  const rv = compareResourceVersion(a.record.resourceVersion ?? '', b.record.resourceVersion ?? '');
  return rv !== 0 ? rv : a.key < b.key ? -1 : a.key > b.key ? 1 : 0;
}

/**
 * ModelRoute resolution exactly as Kthena's router (`MatchModelTarget`; docs/gateway.md, Routing): routes whose
 * `modelName` equals the request model, else routes listing it among `loraAdapters` (a LoRA match); candidates
 * oldest first; for each, the first matching rule (headers, uri, body.model, all ANDed) and a weighted-random
 * target; any failure falls through to the next route.
 */
export class RouteTable {
  readonly #routes = new Map<string, CompiledRoute>();
  #byModel = new Map<string, CompiledRoute[]>();
  #byLora = new Map<string, CompiledRoute[]>();
  #modelsJson: string | undefined;
  readonly #random: () => number;

  constructor(random: () => number = Math.random) {
    this.#random = random;
  }

  /** Adds or replaces a route (key `ns/name`). */
  put(record: ModelRouteRecord): void {
    const key = `${record.namespace}/${record.name}`;
    this.#routes.set(key, {
      key,
      record,
      gatewayOnly: (record.spec.parentRefs?.length ?? 0) > 0,
      rules: (record.spec.rules ?? []).map(compileRule),
    });
    this.#rebuild();
  }

  delete(namespace: string, name: string): void {
    if (this.#routes.delete(`${namespace}/${name}`)) this.#rebuild();
  }

  get size(): number {
    return this.#routes.size;
  }

  /**
   * The route, rule and weighted target of a request; with `accept`, only targets it keeps count (a rule left
   * without any is skipped like a rule that does not match). `listener` is the Gateway listener the request
   * arrived at (Gateway API mode): then only routes attached to that listener count (the pod-watcher lists them
   * in `listeners`); without, routes with parentRefs are skipped (they attach to Gateway listeners only).
   */
  resolve(
    req: RouteFacts,
    accept?: (namespace: string, server: string | undefined, provider: string | undefined) => boolean,
    listener?: ListenerRef,
  ): RouteMatch | undefined {
    let lora = false;
    let candidates = this.#byModel.get(req.model);
    if (candidates === undefined) {
      candidates = this.#byLora.get(req.model);
      lora = true;
    }
    if (candidates === undefined) return undefined;
    for (const route of candidates) {
      if (listener === undefined ? route.gatewayOnly : !attached(route.record, listener)) continue;
      const rule = route.rules.find((r) => ruleMatches(r, req));
      if (rule === undefined) continue;
      const ns = route.record.namespace;
      const target = pickTarget(rule, this.#random, accept === undefined ? undefined : (t) => accept(ns, t.server, t.provider));
      if (target === undefined) continue;
      // Kthena: a LoRA name is never sent to a provider (its webhook refuses such routes).
      if (target.provider !== undefined && lora) continue;
      return {
        route: route.key,
        namespace: route.record.namespace,
        modelServer: target.server ?? '',
        provider: target.provider,
        lora,
        rule: rule.name,
      };
    }
    return undefined;
  }

  /** Whether any route names `model` (as modelName or LoRA adapter): bounds metric label values. */
  knows(model: string): boolean {
    return this.#byModel.has(model) || this.#byLora.has(model);
  }

  /**
   * The `rateLimit` that applies to a request model: Kthena keys limiters by `spec.modelName`, so the oldest
   * route of that name with a limit decides, and LoRA names are not limited.
   */
  rateLimitFor(model: string): RateLimit | undefined {
    const routes = this.#byModel.get(model);
    if (routes === undefined) return undefined;
    for (const r of routes) if (r.record.spec.rateLimit !== undefined) return r.record.spec.rateLimit;
    return undefined;
  }

  /** `GET /v1/models` body: every route modelName and LoRA adapter (cached until the routes change). */
  modelsJson(): string {
    if (this.#modelsJson === undefined) {
      const ids = new Set<string>();
      for (const r of this.#routes.values()) {
        if (r.record.spec.modelName) ids.add(r.record.spec.modelName);
        for (const l of r.record.spec.loraAdapters ?? []) if (l) ids.add(l);
      }
      const data = [...ids].sort().map((id) => ({ id, object: 'model', created: 0, owned_by: 'triad' }));
      this.#modelsJson = JSON.stringify({ object: 'list', data });
    }
    return this.#modelsJson;
  }

  /** `GET /v1/models/{id}` body (OpenAI `models.retrieve`), or undefined when no route names `id`. */
  modelJson(id: string): string | undefined {
    if (!this.knows(id)) return undefined;
    return JSON.stringify({ id, object: 'model', created: 0, owned_by: 'triad' });
  }

  #rebuild(): void {
    const byModel = new Map<string, CompiledRoute[]>();
    const byLora = new Map<string, CompiledRoute[]>();
    const add = (map: Map<string, CompiledRoute[]>, name: string, route: CompiledRoute) => {
      const list = map.get(name);
      if (list) list.push(route);
      else map.set(name, [route]);
    };
    for (const route of this.#routes.values()) {
      const spec = route.record.spec;
      if (spec.modelName) add(byModel, spec.modelName, route);
      for (const l of spec.loraAdapters ?? []) if (l) add(byLora, l, route);
    }
    for (const list of byModel.values()) list.sort(olderFirst);
    for (const list of byLora.values()) list.sort(olderFirst);
    this.#byModel = byModel;
    this.#byLora = byLora;
    this.#modelsJson = undefined;
  }
}
