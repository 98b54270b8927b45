import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { classifyPod, validateResource, type ModelServer, type Pod } from '@triad/crd';
import {
  checkKinds,
  checkModelServerWorkloads,
  checkMonitors,
  checkReferences,
  checkSchedulerConfigs,
  checkTriadContainers,
  checkTriadResources,
  checkWebhooks,
  checkWorkloads,
  crdInfos,
  triadCommandsUsed,
  type CrdInfo,
} from './checks';
import { cliCommands, commandsHelp, type CommandHelp } from './cli-help';
import { kindOf, nameOf, parseManifestFile, yamlFilesUnder, type ManifestDoc } from './documents';
import { kustomizationDirs, loadKustomization, type KustomizeUnit } from './kustomize';

// Every manifest the repo ships, checked without a cluster: kubeconform and kind are not available here, so the
// checks below are our own (structure, references, CLI commands, CRD validation). When kubectl is on PATH its
// built-in kustomize also builds every kustomization.

const root = join(__dirname, '../../..');
const dirs = ['infra/k8s', 'infra/monitoring', 'infra/local', 'examples'].map((d) => join(root, d));
// infra/monitoring/tests holds promtool unit tests (checked by tools/monitoring), not manifests.
const files = dirs.flatMap(yamlFilesUnder).filter((f) => !f.startsWith(join(root, 'infra/monitoring/tests')));
const parsed = files.map((f) => ({ file: f, ...parseManifestFile(root, f) }));
const crdDocs = yamlFilesUnder(join(root, 'infra/crds')).flatMap((f) => parseManifestFile(root, f).docs);
const crds: CrdInfo[] = crdInfos(crdDocs);
const kustomizations: KustomizeUnit[] = kustomizationDirs(files).map((d) => loadKustomization(root, d));
/** Config files that kustomize generators turn into ConfigMaps are YAML, but not manifests. */
const dataFiles = new Set(kustomizations.flatMap((k) => k.dataFiles));
const allDocs = parsed.flatMap((p) => p.docs).filter((d) => !dataFiles.has(d.file));
/** Deployable units: each kustomization's output, and each example file on its own. */
const units: { name: string; docs: readonly ManifestDoc[] }[] = [
  ...kustomizations.map((k) => ({ name: k.dir, docs: k.docs })),
  ...parsed.filter((p) => p.file.startsWith(join(root, 'examples'))).map((p) => ({ name: basename(p.file), docs: p.docs })),
];
/** The documents of all units, each once (the base's objects are part of every overlay too). */
const unitDocs = [...new Map(units.flatMap((u) => u.docs).map((d) => [`${d.file}:${d.line}`, d])).values()];

let commands: Set<string>;
let help: Map<string, CommandHelp>;
beforeAll(async () => {
  commands = await cliCommands(root);
  help = await commandsHelp(root, triadCommandsUsed(unitDocs));
}, 120_000);

describe('repository manifests', () => {
  it('every YAML file under infra/k8s, infra/local and examples parses', () => {
    expect(files.length).toBeGreaterThanOrEqual(15);
    expect(parsed.flatMap((p) => p.problems)).toEqual([]);
  });

  it('uses only known kinds, with current apiVersions (Triad kinds: served by the CRDs in infra/crds)', () => {
    expect(crds.map((c) => c.kind).sort()).toEqual(['ExternalModelProvider', 'ModelRoute', 'ModelServer']);
    expect(checkKinds(allDocs, crds)).toEqual([]);
  });

  it("Triad's kinds, Pods and Gateway API objects pass libs/crd validation with no warning", () => {
    expect(allDocs.filter((d) => ['ModelServer', 'ModelRoute'].includes(kindOf(d))).length).toBeGreaterThanOrEqual(12);
    expect(checkTriadResources(allDocs)).toEqual([]);
  });

  it('the local stack config puts every pod on loopback and in a role of some ModelServer', () => {
    const docs = parseManifestFile(root, join(root, 'infra/local/cluster.yaml')).docs.map((d) => validateResource(d.value));
    const servers = docs.flatMap((r) => (r.status === 'valid' && r.kind === 'ModelServer' ? [r.value as ModelServer] : []));
    const pods = docs.flatMap((r) => (r.status === 'valid' && r.kind === 'Pod' ? [r.value as Pod] : []));
    expect(pods).toHaveLength(9);
    for (const pod of pods) {
      expect(pod.status?.podIP).toMatch(/^127\.0\.\d+\.\d+$/);
      expect(servers.some((ms) => classifyPod(ms.spec, pod.metadata.labels).role !== 'none')).toBe(true);
    }
    expect(new Set(pods.map((p) => p.status?.podIP)).size).toBe(pods.length);
  });

  it('every kustomization resolves: resources and patches exist inside its root, images match containers', () => {
    expect(kustomizations.map((k) => `${k.dir} ${k.kind}`).sort()).toEqual([
      'infra/k8s/base Kustomization',
      'infra/k8s/overlays/demo Kustomization',
      'infra/k8s/overlays/production Kustomization',
      'infra/k8s/webhook Kustomization',
      'infra/k8s/webhook-cert-manager Kustomization',
      'infra/monitoring Component',
      'infra/monitoring/webhook Component',
    ]);
    expect(kustomizations.flatMap((k) => k.problems)).toEqual([]);
  });

  it('kubectl kustomize builds every kustomization when kubectl is installed', () => {
    const kubectl = spawnSync('kubectl', ['version', '--client'], { encoding: 'utf8' });
    const built: string[] = [];
    for (const k of kustomizations) {
      if (kubectl.error) break; // no kubectl here: the resolution test above is the check
      const out = spawnSync('kubectl', ['kustomize', join(root, k.dir)], { encoding: 'utf8', timeout: 60_000 });
      expect(`${k.dir}: ${out.status === 0 ? 'ok' : out.stderr}`).toBe(`${k.dir}: ok`);
      const kinds = parseAllDocuments(out.stdout).map((d) => String((d.toJS() as { kind?: string } | null)?.kind));
      expect(kinds.sort()).toEqual(k.docs.map(kindOf).sort());
      built.push(k.dir);
    }
    expect(built.length === 0 || built.length === kustomizations.length).toBe(true);
  });

  it('each deployable unit defines every ServiceAccount, ConfigMap, Secret, claim, role and target it references', () => {
    expect(units.length).toBe(14);
    expect(units.flatMap((u) => checkReferences(u.docs).map((p) => `[${u.name}] ${p}`))).toEqual([]);
  });

  it('workloads are well formed (selectors, containers, probe ports)', () => {
    expect(checkWorkloads(unitDocs)).toEqual([]);
  });

  it('Triad containers run real `triad` commands with flags the CLI accepts, probes and scraping on the ops port', () => {
    for (const service of ['gateway', 'scheduler', 'pod-watcher', 'webhook']) expect(commands.has(service)).toBe(true);
    expect([...help.keys()].sort()).toEqual(['gateway', 'kv-indexer', 'pod-watcher', 'scheduler', 'sim-engine', 'webhook']);
    expect(checkTriadContainers(unitDocs, commands, help)).toEqual([]);
  });

  it('the production overlay scrapes every Triad service with a PodMonitor on its ops port and ships the rules and dashboards', () => {
    const production = kustomizations.find((k) => k.dir === 'infra/k8s/overlays/production') as KustomizeUnit;
    expect(production.docs.filter((d) => kindOf(d) === 'PodMonitor')).toHaveLength(4);
    expect(production.docs.filter((d) => kindOf(d) === 'PrometheusRule')).toHaveLength(1);
    const dashboards = production.docs.filter((d) => kindOf(d) === 'ConfigMap' && nameOf(d).startsWith('triad-dashboard-'));
    expect(dashboards).toHaveLength(4);
    // A Component's monitors select the workloads of the kustomization that includes it.
    const components = new Set(kustomizations.filter((k) => k.kind === 'Component').map((k) => k.dir));
    expect(units.filter((u) => !components.has(u.name)).flatMap((u) => checkMonitors(u.docs).map((p) => `[${u.name}] ${p}`))).toEqual([]);
  });

  it('the webhook PodMonitor component (infra/monitoring/webhook) scrapes the webhook on its ops port', () => {
    const webhook = kustomizations.find((k) => k.dir === 'infra/k8s/webhook') as KustomizeUnit;
    const monitor = kustomizations.find((k) => k.dir === 'infra/monitoring/webhook') as KustomizeUnit;
    expect(monitor.docs.filter((d) => kindOf(d) === 'PodMonitor')).toHaveLength(1);
    expect(checkMonitors([...webhook.docs, ...monitor.docs])).toEqual([]);
    // Without the monitor the check would say the webhook is not scraped.
    expect(
      checkMonitors([
        ...webhook.docs,
        ...monitor.docs.map((d) => ({
          ...d,
          value: {
            ...d.value,
            spec: {
              ...(d.value['spec'] as object),
              podMetricsEndpoints: [{ port: 'https', path: '/metrics' }],
            },
          },
        })),
      ]),
    ).not.toEqual([]);
  });

  it('each ModelServer shipped with workloads has a pod template on the right port for every role of its mode', () => {
    expect(units.flatMap((u) => checkModelServerWorkloads(u.docs))).toEqual([]);
  });

  it('admission webhooks call a Service of their unit, with the CA from a Certificate of their unit', () => {
    expect(unitDocs.filter((d) => kindOf(d) === 'ValidatingWebhookConfiguration')).toHaveLength(1);
    // A kustomization's patches set what the checks read (the cert-manager overlay adds the CA injection).
    const withPatches = kustomizations.map((k) => [...k.docs, ...k.patchDocs]);
    expect(withPatches.filter((docs) => docs.some((d) => JSON.stringify(d.value).includes('inject-ca-from')))).toHaveLength(1);
    expect(withPatches.flatMap((docs) => checkWebhooks(docs))).toEqual([]);
  });

  it("the shipped scheduler config passes the scheduler's schema", () => {
    expect(checkSchedulerConfigs(unitDocs)).toEqual([]);
  });

  it('the CRDs in infra/crds are installed by the documented deployment steps', () => {
    const guide = readFileSync(join(root, 'docs/deployment.md'), 'utf8');
    expect(guide).toContain('kubectl apply --server-side -f infra/crds/');
    const base = readFileSync(join(root, 'infra/k8s/base/kustomization.yaml'), 'utf8');
    expect(base).toContain('kubectl apply --server-side -f infra/crds/');
    const kindsUsed = new Set(
      allDocs.map(kindOf).filter((k) => k === 'ModelServer' || k === 'ModelRoute' || k === 'ExternalModelProvider'),
    );
    expect(kindsUsed.size).toBe(3);
    for (const kind of kindsUsed) expect(crds.some((c) => c.kind === kind)).toBe(true);
  });
});
