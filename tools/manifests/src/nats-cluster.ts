/** A manifest as kustomize builds it (plain object). */
type Obj = Record<string, unknown>;

const asObj = (v: unknown): Obj => (v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Obj) : {});
const asList = (v: unknown): Obj[] => (Array.isArray(v) ? v.map(asObj) : []);
const named = (docs: readonly Obj[], kind: string, name: string | RegExp): Obj | undefined =>
  docs.find((d) => {
    const n = String(asObj(d['metadata'])['name'] ?? '');
    return d['kind'] === kind && (typeof name === 'string' ? n === name : name.test(n));
  });

/**
 * Checks a built unit that runs NATS as a JetStream cluster: the `nats` StatefulSet has an odd number of
 * replicas (a quorum survives a loss) started in parallel, each pod routes to every other (`cluster` block with
 * a route per ordinal on the headless Service's cluster port), a PodDisruptionBudget lets one go at a time, and
 * every Triad service (`triad-env`) gets each pod as a seed and KV buckets with that many replicas.
 */
export function checkNatsCluster(docs: readonly Obj[]): string[] {
  const problems: string[] = [];
  const sts = named(docs, 'StatefulSet', 'nats');
  if (sts === undefined) return ['no StatefulSet nats'];
  const spec = asObj(sts['spec']);
  const replicas = Number(spec['replicas'] ?? 1);
  if (replicas < 3 || replicas % 2 === 0)
    problems.push(`StatefulSet nats: ${replicas} replicas; a JetStream cluster needs an odd number, at least 3`);
  if (spec['podManagementPolicy'] !== 'Parallel')
    problems.push('StatefulSet nats: podManagementPolicy must be Parallel (a quorum must start together)');
  const service = String(spec['serviceName'] ?? '');
  const container = asList(asObj(asObj(spec['template'])['spec'])['containers']).find((c) => c['name'] === 'nats');
  const clusterPort = asList(container?.['ports']).find((p) => p['name'] === 'cluster');
  const routePort = Number(clusterPort?.['containerPort'] ?? 0);
  if (routePort === 0) problems.push('StatefulSet nats: container nats declares no port named cluster');
  const headless = named(docs, 'Service', service);
  if (!asList(asObj(headless?.['spec'])['ports']).some((p) => Number(p['port']) === routePort)) {
    problems.push(`Service ${service}: no port ${routePort} for the cluster routes`);
  }
  const conf = String(asObj(named(docs, 'ConfigMap', /^nats-config/)?.['data'])['nats.conf'] ?? '');
  const clusterBlock = /cluster\s*\{([\s\S]*?)\n\s*\}/.exec(conf)?.[1] ?? '';
  if (clusterBlock === '') problems.push('ConfigMap nats-config: nats.conf has no cluster block');
  else {
    if (!new RegExp(`port:\\s*${routePort}\\b`).test(clusterBlock))
      problems.push(`nats.conf cluster block does not listen on ${routePort}`);
    for (let i = 0; i < replicas; i++) {
      if (!clusterBlock.includes(`nats-${i}.${service}:${routePort}`))
        problems.push(`nats.conf cluster routes miss nats-${i}.${service}:${routePort}`);
    }
  }
  if (!/jetstream\s*\{/.test(conf)) problems.push('ConfigMap nats-config: nats.conf does not enable JetStream');
  const pdb = docs.find(
    (d) =>
      d['kind'] === 'PodDisruptionBudget' && asObj(asObj(asObj(d['spec'])['selector'])['matchLabels'])['app.kubernetes.io/name'] === 'nats',
  );
  if (pdb === undefined || Number(asObj(pdb['spec'])['maxUnavailable']) !== 1)
    problems.push('no PodDisruptionBudget with maxUnavailable 1 for nats');
  const env = asObj(named(docs, 'ConfigMap', /^triad-env/)?.['data']);
  const seeds = String(env['TRIAD_NATS_URL'] ?? '').split(',');
  for (let i = 0; i < replicas; i++) {
    if (!seeds.some((u) => u.includes(`nats-${i}.${service}:`)))
      problems.push(`triad-env TRIAD_NATS_URL misses the seed nats-${i}.${service}`);
  }
  if (Number(env['TRIAD_KV_REPLICAS'] ?? 1) !== replicas) {
    problems.push(`triad-env TRIAD_KV_REPLICAS is ${String(env['TRIAD_KV_REPLICAS'] ?? 'unset (1)')}, not the cluster's ${replicas}`);
  }
  return problems;
}
