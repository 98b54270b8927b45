import { DEFAULT_SGLANG_ENCODER_BOOTSTRAP_PORT } from '@triad/crd';
import type { SglangServerInfo } from '../scrape/server-info';
import { hashString32 } from '@triad/scheduling/hashing';
import type { Placement } from '../topology/placement';

/** `http://ip:port` of a placement (IPv6 addresses bracketed). */
export function baseUrl(p: Pick<Placement, 'ip' | 'port'>): string {
  return p.ip.includes(':') ? `http://[${p.ip}]:${p.port}` : `http://${p.ip}:${p.port}`;
}

/** What the watcher knows of an engine address right now. */
export interface EngineState {
  /** Scraped successfully at least once and the last scrape did not fail. */
  readonly healthy: boolean;
  /** running + waiting, from the last good scrape. */
  readonly load: number;
  readonly serverInfo?: SglangServerInfo;
}

/** One wanted registry member and whether it may be registered now (only healthy encoders join a registry). */
export interface WantedEncoder {
  readonly healthy: boolean;
}

/** The desired content of one language-only server's encoder registry. */
export interface RegistryPlan {
  /** `http://ip:encoder_bootstrap_port`: the registry listener. */
  readonly registryUrl: string;
  /** Where the port came from: the pod annotation, the engine's `/server_info`, or SGLang's default. */
  readonly portSource: 'annotation' | 'server-info' | 'default';
  /** Endpoint keys of the placements this registry serves (one pod can serve several ModelServers). */
  readonly prefills: readonly string[];
  readonly want: ReadonlyMap<string, WantedEncoder>;
}

export interface PlanOptions {
  /** 0: every eligible encoder in every registry; N: N encoders per registry, spread over the registries. */
  readonly encodersPerPrefill: number;
  /** The previous plan's members per registry (spreading keeps what it chose while it stays valid). */
  readonly previous?: ReadonlyMap<string, ReadonlySet<string>>;
}

function registryOf(p: Placement, state: EngineState | undefined): Pick<RegistryPlan, 'registryUrl' | 'portSource'> {
  const [port, portSource] =
    p.encoderBootstrapPort !== undefined
      ? [p.encoderBootstrapPort, 'annotation' as const]
      : state?.serverInfo?.encoderBootstrapPort !== undefined
        ? [state.serverInfo.encoderBootstrapPort, 'server-info' as const]
        : [DEFAULT_SGLANG_ENCODER_BOOTSTRAP_PORT, 'default' as const];
  return { registryUrl: baseUrl({ ip: p.ip, port }), portSource };
}

/** Rendezvous hash of a (registry, encoder) pair: a stable, well-spread tie-break. */
const pairHash = (a: string, b: string): number => hashString32(`${a}|${b}`);

interface Candidate {
  readonly url: string;
  readonly healthy: boolean;
  readonly load: number;
}

/**
 * Spreads encoders over registries, `perRegistry` each: a registry keeps the members it had while they are still
 * candidates and healthy (or no healthy replacement exists), then takes the healthy candidates serving the fewest
 * registries so far, the least loaded first, ties broken by a stable hash. Load only matters when a choice is made,
 * so a busy engine does not make registries churn.
 */
function spread(
  registries: readonly string[],
  candidatesOf: (registry: string) => readonly Candidate[],
  perRegistry: number,
  previous: PlanOptions['previous'],
): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  const serving = new Map<string, number>();
  const bump = (url: string) => serving.set(url, (serving.get(url) ?? 0) + 1);
  for (const registry of registries) {
    const candidates = candidatesOf(registry);
    const byUrl = new Map(candidates.map((c) => [c.url, c]));
    const spareHealthy = candidates.filter((c) => c.healthy && !previous?.get(registry)?.has(c.url)).length;
    let replaceable = spareHealthy;
    const kept = new Set<string>();
    for (const url of previous?.get(registry) ?? []) {
      const c = byUrl.get(url);
      if (!c || kept.size >= perRegistry) continue;
      // An unhealthy member gives way only to a healthy encoder it can be swapped for.
      if (!c.healthy && replaceable > 0) {
        replaceable--;
        continue;
      }
      kept.add(url);
    }
    out.set(registry, kept);
    for (const url of kept) bump(url);
  }
  for (const registry of registries) {
    const chosen = out.get(registry) as Set<string>;
    const free = candidatesOf(registry)
      .filter((c) => c.healthy && !chosen.has(c.url))
      .sort(
        (x, y) =>
          (serving.get(x.url) ?? 0) - (serving.get(y.url) ?? 0) || x.load - y.load || pairHash(registry, x.url) - pairHash(registry, y.url),
      );
    for (const c of free) {
      if (chosen.size >= perRegistry) break;
      chosen.add(c.url);
      bump(c.url);
    }
  }
  return out;
}

/**
 * What each SGLang language-only server's encoder registry should hold, for every SGLang ModelServer in `epd` mode:
 * the encode pods of its PD group plus the encode pods without a group (they serve every group), all of them
 * (`encodersPerPrefill` 0) or spread N per registry. Keyed by registry URL, since the registry lives in the server
 * process; a pod serving two such ModelServers gets the union. A server whose `/server_info` says it is not
 * language-only has no registry and is left out.
 */
export function planEncoderRegistries(
  placements: Iterable<Placement>,
  stateOf: (p: Placement) => EngineState | undefined,
  options: PlanOptions,
): Map<string, RegistryPlan> {
  const byServer = new Map<string, { owners: Placement[]; encoders: Placement[] }>();
  for (const p of placements) {
    if (p.engine !== 'SGLang' || p.mode !== 'epd' || (!p.registryOwner && p.role !== 'encode')) continue;
    const id = `${p.namespace}/${p.modelServer}`;
    let s = byServer.get(id);
    if (!s) byServer.set(id, (s = { owners: [], encoders: [] }));
    if (p.registryOwner) s.owners.push(p);
    else s.encoders.push(p);
  }
  type Draft = { registryUrl: string; portSource: RegistryPlan['portSource']; prefills: string[]; candidates: Map<string, Candidate> };
  const plans = new Map<string, Draft>();
  for (const { owners, encoders } of byServer.values()) {
    for (const owner of owners) {
      const state = stateOf(owner);
      if (state?.serverInfo?.languageOnly === false) continue;
      const { registryUrl, portSource } = registryOf(owner, state);
      let plan = plans.get(registryUrl);
      if (!plan) plans.set(registryUrl, (plan = { registryUrl, portSource, prefills: [], candidates: new Map() }));
      plan.prefills.push(owner.key);
      for (const e of encoders) {
        if (e.group !== undefined && e.group !== owner.group) continue;
        const s = stateOf(e);
        plan.candidates.set(baseUrl(e), { url: baseUrl(e), healthy: s?.healthy ?? false, load: s?.load ?? 0 });
      }
    }
  }
  const registries = [...plans.keys()].sort();
  const chosen =
    options.encodersPerPrefill > 0
      ? spread(registries, (r) => [...(plans.get(r)?.candidates.values() ?? [])], options.encodersPerPrefill, options.previous)
      : undefined;
  const out = new Map<string, RegistryPlan>();
  for (const registryUrl of registries) {
    const plan = plans.get(registryUrl)!;
    const want = new Map<string, WantedEncoder>();
    for (const c of plan.candidates.values()) if (!chosen || chosen.get(registryUrl)?.has(c.url)) want.set(c.url, { healthy: c.healthy });
    out.set(registryUrl, { registryUrl, portSource: plan.portSource, prefills: plan.prefills, want });
  }
  return out;
}
