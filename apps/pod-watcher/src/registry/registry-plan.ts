import type { Placement } from '../topology/placement';

/** `http://ip:port` of a placement (IPv6 addresses bracketed). */
export function baseUrl(p: Pick<Placement, 'ip' | 'port'>): string {
  return p.ip.includes(':') ? `http://[${p.ip}]:${p.port}` : `http://${p.ip}:${p.port}`;
}

/**
 * What each SGLang language-only prefill's encoder registry should hold: the healthy encode pods of its PD group
 * plus the encode pods without a group (they serve every group), for every SGLang ModelServer in `epd` mode.
 * Keyed by the prefill's base URL, since the registry lives in the server process; a prefill pod serving two such
 * ModelServers gets the union.
 */
export function planEncoderRegistries(placements: Iterable<Placement>, healthy: (p: Placement) => boolean): Map<string, Set<string>> {
  const byServer = new Map<string, { prefills: Placement[]; encoders: Placement[] }>();
  for (const p of placements) {
    if (p.engine !== 'SGLang' || p.mode !== 'epd' || (p.role !== 'prefill' && p.role !== 'encode')) continue;
    const id = `${p.namespace}/${p.modelServer}`;
    let s = byServer.get(id);
    if (!s) byServer.set(id, (s = { prefills: [], encoders: [] }));
    if (p.role === 'prefill') s.prefills.push(p);
    else if (healthy(p)) s.encoders.push(p);
  }
  const plan = new Map<string, Set<string>>();
  for (const { prefills, encoders } of byServer.values()) {
    for (const prefill of prefills) {
      const url = baseUrl(prefill);
      let want = plan.get(url);
      if (!want) plan.set(url, (want = new Set()));
      for (const e of encoders) if (e.group === undefined || e.group === prefill.group) want.add(baseUrl(e));
    }
  }
  return plan;
}
