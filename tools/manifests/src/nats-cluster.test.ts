import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { checkNatsCluster } from './nats-cluster';

const root = join(__dirname, '../../..');

/** What `kubectl kustomize DIR` builds, as plain objects (kubectl's built-in kustomize applies the patches). */
function build(dir: string): Record<string, unknown>[] {
  const out = spawnSync('kubectl', ['kustomize', join(root, dir)], { encoding: 'utf8', timeout: 60_000 });
  if (out.error) throw new Error(`kubectl is needed to build ${dir}: ${out.error.message}`);
  expect(out.stderr).toBe('');
  return parseAllDocuments(out.stdout)
    .map((d) => d.toJS() as Record<string, unknown>)
    .filter((d) => d !== null);
}

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- planted edits reach deep into built objects
const find = (docs: Obj[], kind: string, name: RegExp): Obj =>
  docs.find((d) => d['kind'] === kind && name.test(d['metadata']['name'])) as Obj;

describe('NATS in the shipped manifests', () => {
  const production = build('infra/k8s/overlays/production');

  it('the production overlay runs a 3-node JetStream cluster, and every service gets all seeds and 3 KV replicas', () => {
    expect(checkNatsCluster(production)).toEqual([]);
    expect(find(production, 'StatefulSet', /^nats$/)['spec']['replicas']).toBe(3);
    expect(find(production, 'ConfigMap', /^triad-env/)['data']['TRIAD_KV_REPLICAS']).toBe('3');
  });

  it('the base stays a single server with one replica per bucket (and the check says it is no cluster)', () => {
    const base = build('infra/k8s/base');
    expect(find(base, 'StatefulSet', /^nats$/)['spec']['replicas']).toBe(1);
    expect(find(base, 'ConfigMap', /^triad-env/)['data']['TRIAD_KV_REPLICAS']).toBeUndefined();
    expect(checkNatsCluster(base)).toEqual(
      expect.arrayContaining([
        'StatefulSet nats: 1 replicas; a JetStream cluster needs an odd number, at least 3',
        'ConfigMap nats-config: nats.conf has no cluster block',
      ]),
    );
  });

  it('catches planted mistakes: an even cluster, a missing route or seed, too few KV replicas, no route port', () => {
    const planted = structuredClone(production) as Obj[];
    find(planted, 'StatefulSet', /^nats$/)['spec']['replicas'] = 4;
    const conf = find(planted, 'ConfigMap', /^nats-config/)['data'];
    conf['nats.conf'] = String(conf['nats.conf']).replace('nats://nats-1.nats-headless:6222', '');
    const env = find(planted, 'ConfigMap', /^triad-env/)['data'];
    env['TRIAD_NATS_URL'] = 'nats://nats:4222';
    env['TRIAD_KV_REPLICAS'] = '1';
    const headless = find(planted, 'Service', /^nats-headless$/)['spec'];
    headless['ports'] = (headless['ports'] as Obj[]).filter((p) => p['port'] !== 6222);
    expect(checkNatsCluster(planted)).toEqual([
      'StatefulSet nats: 4 replicas; a JetStream cluster needs an odd number, at least 3',
      'Service nats-headless: no port 6222 for the cluster routes',
      'nats.conf cluster routes miss nats-1.nats-headless:6222',
      'nats.conf cluster routes miss nats-3.nats-headless:6222',
      'triad-env TRIAD_NATS_URL misses the seed nats-0.nats-headless',
      'triad-env TRIAD_NATS_URL misses the seed nats-1.nats-headless',
      'triad-env TRIAD_NATS_URL misses the seed nats-2.nats-headless',
      'triad-env TRIAD_NATS_URL misses the seed nats-3.nats-headless',
      "triad-env TRIAD_KV_REPLICAS is 1, not the cluster's 4",
    ]);
  });
});
