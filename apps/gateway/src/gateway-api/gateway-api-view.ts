import {
  Buckets,
  GatewayRecordSchema,
  HttpRouteRecordSchema,
  type GatewayRecord,
  type HttpRouteRecord,
  type HttpRouteRuleRecord,
  type ListenerRef,
} from '@triad/bus';
import type { Bus, KvChange, KvWatchHandle } from '@triad/bus/client';

/** Where a request arrived in Gateway API mode. */
export type ListenerMatch =
  /** No Gateway listener on this port: classic routing (ModelRoutes without parentRefs). */
  | { readonly kind: 'none' }
  /** Listeners on this port, none for this Host: Kthena's 404 `No matching listener found`. */
  | { readonly kind: 'no-match' }
  | { readonly kind: 'listener'; readonly listener: ListenerRef };

/** An HTTPRoute rule that matched, with the backend it picked and the rewrite to apply. */
export interface HttpRouteMatch {
  /** `namespace/name` of the HTTPRoute. */
  readonly route: string;
  readonly rule: number;
  /** The picked InferencePool backend, or undefined when the rule has none with weight (answer 500). */
  readonly backend: { readonly namespace: string; readonly pool: string; readonly modelServer: string } | undefined;
  /** The path the engine gets after URLRewrite (undefined: unchanged). */
  readonly path: string | undefined;
  /** The Host the engine gets after URLRewrite (undefined: unchanged). */
  readonly hostname: string | undefined;
}

interface CompiledMatch {
  readonly test: (path: string) => { matched: boolean; prefix: string };
  /** Exact 3, PathPrefix 2, RegularExpression 1 (Gateway API precedence, as Kthena orders them). */
  readonly type: number;
  readonly chars: number;
}

interface CompiledRoute {
  readonly key: string;
  readonly record: HttpRouteRecord;
  readonly rules: readonly { readonly record: HttpRouteRuleRecord; readonly matches: readonly CompiledMatch[] }[];
}

const EXACT = 3;
const PREFIX = 2;
const REGEX = 1;
const NO_MATCH = { matched: false, prefix: '' };

function compileMatch(m: HttpRouteRuleRecord['matches'][number]): CompiledMatch {
  if (m.type === 'Exact')
    return { test: (p) => (p === m.value ? { matched: true, prefix: '' } : NO_MATCH), type: EXACT, chars: m.value.length };
  if (m.type === 'RegularExpression') {
    let re: RegExp | undefined;
    try {
      // Gateway API regexes are RE2 flavoured and match the whole path.
      re = new RegExp(`^(?:${m.value})$`);
    } catch {
      re = undefined;
    }
    return { test: (p) => (re?.test(p) ? { matched: true, prefix: '' } : NO_MATCH), type: REGEX, chars: 0 };
  }
  // PathPrefix matches whole segments: `/v1` matches `/v1` and `/v1/x`, not `/v10`.
  const prefix = m.value.replace(/\/+$/, '');
  if (prefix === '') return { test: (p) => (p.startsWith('/') ? { matched: true, prefix: '/' } : NO_MATCH), type: PREFIX, chars: 1 };
  return {
    test: (p) => (p === prefix || p.startsWith(`${prefix}/`) ? { matched: true, prefix } : NO_MATCH),
    type: PREFIX,
    chars: prefix.length,
  };
}

/** Host without port, trailing dot and brackets, lower-cased. */
export function normalizeHost(host: string | undefined): string {
  if (host === undefined) return '';
  let h = host.trim().toLowerCase();
  if (h.startsWith('[')) h = h.slice(1, h.indexOf(']') < 0 ? undefined : h.indexOf(']'));
  else if (h.indexOf(':') === h.lastIndexOf(':') && h.includes(':')) h = h.slice(0, h.indexOf(':'));
  return h.replace(/\.$/, '');
}

/** Exact 2 (by length), wildcard `*.suffix` 1 (by suffix length; the `*` needs at least one character), else no match. */
function hostnameRank(pattern: string, host: string): [number, number] | undefined {
  const p = pattern.toLowerCase().replace(/\.$/, '');
  if (p === host) return [2, p.length];
  if (!p.startsWith('*.')) return undefined;
  const suffix = p.slice(1);
  return host.endsWith(suffix) && host.length > suffix.length ? [1, suffix.length] : undefined;
}

function compareRank(a: readonly number[], b: readonly number[]): number {
  for (let i = 0; i < a.length; i++) if ((a[i] ?? 0) !== (b[i] ?? 0)) return (b[i] ?? 0) - (a[i] ?? 0);
  return 0;
}

/**
 * The gateway's view of the pod-watcher's Gateway API records (`triad_v1_gateways`, `triad_v1_httproutes`):
 * which listeners to open (one server per port), which listener a request's Host selects (exact hostname,
 * then the longest wildcard, then a listener without hostname), and which HTTPRoute rule serves a request on a
 * listener, with Gateway API precedence as Kthena applies it (route hostname: exact over wildcard over none;
 * path: Exact over PathPrefix over RegularExpression, longer first; then the older route, then namespace/name;
 * within a route the lower rule and match index).
 */
export class GatewayApiView {
  readonly #gateways = new Map<string, GatewayRecord>();
  readonly #routes = new Map<string, CompiledRoute>();
  #byPort = new Map<number, (ListenerRef & { hostname?: string | undefined })[]>();
  #watches: KvWatchHandle[] = [];
  readonly #onPorts: (ports: ReadonlySet<number>) => void;
  readonly #random: () => number;

  constructor(onPorts: (ports: ReadonlySet<number>) => void, random: () => number = Math.random) {
    this.#onPorts = onPorts;
    this.#random = random;
  }

  async start(bus: Bus): Promise<void> {
    const [gateways, routes] = await Promise.all([
      bus.kv(Buckets.gateways, GatewayRecordSchema),
      bus.kv(Buckets.httpRoutes, HttpRouteRecordSchema),
    ]);
    this.#watches = await Promise.all([
      gateways.watch({ onChange: (c) => this.applyGateway(c) }),
      routes.watch({ onChange: (c) => this.applyHttpRoute(c) }),
    ]);
    await Promise.all(this.#watches.map((w) => w.synced));
  }

  stop(): void {
    for (const w of this.#watches) w.stop();
    this.#watches = [];
  }

  /** Ports with at least one HTTP listener. */
  get ports(): ReadonlySet<number> {
    return new Set(this.#byPort.keys());
  }

  applyGateway(change: KvChange<GatewayRecord>): void {
    if (change.op === 'PUT') this.#gateways.set(change.key, change.value);
    else this.#gateways.delete(change.key);
    const byPort = new Map<number, (ListenerRef & { hostname?: string | undefined })[]>();
    for (const g of this.#gateways.values()) {
      for (const l of g.listeners) {
        const list = byPort.get(l.port) ?? [];
        list.push({ namespace: g.namespace, gateway: g.name, listener: l.name, port: l.port, hostname: l.hostname });
        byPort.set(l.port, list);
      }
    }
    const before = [...this.#byPort.keys()].sort().join(',');
    this.#byPort = byPort;
    if ([...byPort.keys()].sort().join(',') !== before) this.#onPorts(this.ports);
  }

  applyHttpRoute(change: KvChange<HttpRouteRecord>): void {
    if (change.op === 'DEL') {
      this.#routes.delete(change.key);
      return;
    }
    const r = change.value;
    this.#routes.set(change.key, {
      key: `${r.namespace}/${r.name}`,
      record: r,
      rules: r.rules.map((rule) => ({ record: rule, matches: rule.matches.map(compileMatch) })),
    });
  }

  /** The listener a request on local `port` with `host` arrived at. */
  listenerFor(port: number, host: string | undefined): ListenerMatch {
    const listeners = this.#byPort.get(port);
    if (listeners === undefined || listeners.length === 0) return { kind: 'none' };
    const h = normalizeHost(host);
    let best: ListenerRef | undefined;
    let bestRank: [number, number] = [-1, 0];
    for (const l of listeners) {
      const rank: [number, number] | undefined = l.hostname === undefined ? [0, 0] : hostnameRank(l.hostname, h);
      if (rank !== undefined && compareRank(rank, bestRank) < 0) {
        best = { namespace: l.namespace, gateway: l.gateway, listener: l.listener, port: l.port };
        bestRank = rank;
      }
    }
    return best === undefined ? { kind: 'no-match' } : { kind: 'listener', listener: best };
  }

  /** The HTTPRoute rule serving `path` with `host` on `listener`, or undefined when none matches. */
  match(listener: ListenerRef, host: string | undefined, path: string): HttpRouteMatch | undefined {
    const h = normalizeHost(host);
    let best: { route: CompiledRoute; rule: number; match: CompiledMatch; prefix: string; rank: number[] } | undefined;
    for (const route of this.#routes.values()) {
      const r = route.record;
      if (!r.parents.some((p) => p.namespace === listener.namespace && p.gateway === listener.gateway && p.listener === listener.listener))
        continue;
      let hostRank: [number, number] | undefined = [0, 0];
      if (r.hostnames.length > 0) {
        hostRank = undefined;
        for (const pattern of r.hostnames) {
          const rank = hostnameRank(pattern, h);
          if (rank !== undefined && (hostRank === undefined || compareRank(rank, hostRank) < 0)) hostRank = rank;
        }
      }
      if (hostRank === undefined) continue;
      route.rules.forEach((rule, ruleIndex) => {
        rule.matches.forEach((m, matchIndex) => {
          const result = m.test(path);
          if (!result.matched) return;
          // Lower is better after negation: hostname, path type and length first; then age, name; then indexes.
          const rank = [hostRank[0], hostRank[1], m.type, m.chars];
          const candidate = { route, rule: rule.record.index, match: m, prefix: result.prefix, rank: [...rank, ruleIndex, matchIndex] };
          if (best === undefined || this.#better(candidate, best)) best = candidate;
        });
      });
    }
    if (best === undefined) return undefined;
    const chosen = best as { route: CompiledRoute; rule: number; prefix: string };
    const ruleRecord = chosen.route.record.rules.find((r) => r.index === chosen.rule);
    return {
      route: chosen.route.key,
      rule: chosen.rule,
      backend: ruleRecord === undefined ? undefined : this.#pick(ruleRecord),
      ...this.#rewrite(ruleRecord, path, chosen.prefix),
    };
  }

  #better(a: { route: CompiledRoute; rank: number[] }, b: { route: CompiledRoute; rank: number[] }): boolean {
    const specific = compareRank(a.rank.slice(0, 4), b.rank.slice(0, 4));
    if (specific !== 0) return specific < 0;
    if (a.route !== b.route) {
      const ta = Date.parse(a.route.record.creationTimestamp ?? '1970-01-01T00:00:00Z');
      const tb = Date.parse(b.route.record.creationTimestamp ?? '1970-01-01T00:00:00Z');
      if (ta !== tb) return ta < tb;
      return a.route.key < b.route.key;
    }
    const [ra, ma] = a.rank.slice(4) as [number, number];
    const [rb, mb] = b.rank.slice(4) as [number, number];
    return ra !== rb ? ra < rb : ma < mb;
  }

  #pick(rule: HttpRouteRuleRecord): HttpRouteMatch['backend'] {
    const total = rule.backends.reduce((s, b) => s + b.weight, 0);
    if (total <= 0) return undefined;
    let r = this.#random() * total;
    for (const b of rule.backends) {
      if (b.weight <= 0) continue;
      if (r < b.weight) return { namespace: b.namespace, pool: b.name, modelServer: b.modelServer };
      r -= b.weight;
    }
    const last = rule.backends.filter((b) => b.weight > 0).at(-1)!;
    return { namespace: last.namespace, pool: last.name, modelServer: last.modelServer };
  }

  #rewrite(
    rule: HttpRouteRuleRecord | undefined,
    path: string,
    prefix: string,
  ): { path: string | undefined; hostname: string | undefined } {
    const rewrite = rule?.urlRewrite;
    let newPath: string | undefined;
    const p = rewrite?.path;
    if (p?.type === 'ReplaceFullPath' && p.replaceFullPath !== undefined) newPath = p.replaceFullPath;
    else if (p?.type === 'ReplacePrefixMatch' && p.replacePrefixMatch !== undefined && prefix !== '') {
      // `/` as the matched prefix keeps the rest's leading slash; a replacement's trailing slash is not doubled.
      const rest = prefix === '/' ? path : path.slice(prefix.length);
      const replacement = p.replacePrefixMatch.replace(/\/+$/, '');
      newPath = `${replacement}${rest}` || '/';
      if (!newPath.startsWith('/')) newPath = `/${newPath}`;
    }
    return { path: newPath, hostname: rewrite?.hostname };
  }
}
