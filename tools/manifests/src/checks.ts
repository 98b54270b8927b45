import { API_GROUP, classifyPod, resolvePipelineMode, rolePort, validateResource, type ModelServer } from '@triad/crd';
import { SchedulerConfigSchema } from '@triad/scheduling';
import { parse as parseYaml } from 'yaml';
import type { CommandHelp } from './cli-help';
import { kindOf, nameOf, where, type ManifestDoc } from './documents';
import { BUILT_IN_KINDS, WORKLOAD_KINDS } from './kinds';
import { containersOf, list, obj, podTemplateOf, referencesOf, resolvePort, selects, type Container } from './pod-templates';

/** The image every Triad service runs (`triad <command>`); kustomize `images` sets its tag. */
export const TRIAD_IMAGE = 'ghcr.io/triad-llm/triad';
/** Triad services and the ops port flag their probes and scrape annotations must agree with. */
export const TRIAD_SERVICES = new Set(['gateway', 'scheduler', 'pod-watcher', 'webhook', 'kv-indexer']);

/** A CRD from infra/crds: its kind, group and served versions. */
export interface CrdInfo {
  readonly kind: string;
  readonly group: string;
  readonly versions: readonly string[];
  readonly file: string;
}

/** Reads the kinds a set of CustomResourceDefinition documents defines. */
export function crdInfos(docs: readonly ManifestDoc[]): CrdInfo[] {
  return docs
    .filter((d) => kindOf(d) === 'CustomResourceDefinition')
    .map((d) => {
      const spec = obj(d.value['spec']);
      return {
        kind: String(obj(spec['names'])['kind']),
        group: String(spec['group']),
        versions: list(spec['versions'])
          .filter((v) => v['served'] === true)
          .map((v) => String(v['name'])),
        file: d.file,
      };
    });
}

/** Every document has a kind this repo knows, written with the right apiVersion (CRs: a served version). */
export function checkKinds(docs: readonly ManifestDoc[], crds: readonly CrdInfo[]): string[] {
  const problems: string[] = [];
  for (const doc of docs) {
    const kind = kindOf(doc);
    const apiVersion = String(doc.value['apiVersion'] ?? '');
    const builtIn = BUILT_IN_KINDS[kind];
    const crd = crds.find((c) => c.kind === kind);
    if (!kind) problems.push(`${doc.file}:${doc.line} has no kind`);
    else if (builtIn) {
      if (apiVersion !== builtIn) problems.push(`${where(doc)}: apiVersion ${apiVersion || '(none)'} should be ${builtIn}`);
    } else if (crd) {
      if (!crd.versions.some((v) => apiVersion === `${crd.group}/${v}`)) {
        problems.push(`${where(doc)}: apiVersion ${apiVersion} is not served by the CRD in ${crd.file}`);
      }
    } else problems.push(`${where(doc)}: unknown kind (neither built in nor defined in infra/crds)`);
    const unnamed = kind !== 'Kustomization' && kind !== 'Component' && !nameOf(doc);
    if (kind && unnamed) problems.push(`${doc.file}:${doc.line} ${kind} has no metadata.name`);
  }
  return problems;
}

const GATEWAY_API_KINDS = new Set(['Gateway', 'HTTPRoute', 'InferencePool']);

/**
 * Triad's kinds, Pods with a status (local configs) and the Gateway API kinds pass the same libs/crd validation
 * the pod-watcher and the webhook apply, with no warning either (`triad validate --strict`): nothing the API
 * server would drop or refuse, no Gateway API feature Triad does not serve.
 */
export function checkTriadResources(docs: readonly ManifestDoc[]): string[] {
  const problems: string[] = [];
  for (const doc of docs) {
    const kind = kindOf(doc);
    const isTriad = String(doc.value['apiVersion'] ?? '').startsWith(`${API_GROUP}/`);
    if (!isTriad && !GATEWAY_API_KINDS.has(kind) && !(kind === 'Pod' && doc.value['status'])) continue;
    const result = validateResource(doc.value);
    const say = (p: { path: string; message: string }, prefix = '') => `${where(doc)}: ${prefix}${p.path ? `${p.path}: ` : ''}${p.message}`;
    if (result.status === 'invalid') problems.push(...result.problems.map((p) => say(p)));
    problems.push(...result.warnings.map((p) => say(p, 'warning: ')));
  }
  return problems;
}

/**
 * Admission webhooks call a Service of the same unit on one of its ports, and a cert-manager CA injection names
 * a Certificate of the unit.
 */
export function checkWebhooks(docs: readonly ManifestDoc[]): string[] {
  const problems: string[] = [];
  for (const doc of docs.filter((d) => kindOf(d) === 'ValidatingWebhookConfiguration')) {
    // A patch document may carry only metadata (no webhooks).
    for (const hook of list(doc.value['webhooks'])) {
      const svc = obj(obj(hook['clientConfig'])['service']);
      const target = docs.find((d) => kindOf(d) === 'Service' && nameOf(d) === svc['name']);
      if (!target)
        problems.push(`${where(doc)}: webhook ${String(hook['name'])} calls Service ${String(svc['name'])}, which is not defined`);
      else if (!list(obj(target.value['spec'])['ports']).some((p) => p['port'] === (svc['port'] ?? 443))) {
        const port = String(svc['port'] ?? 443);
        problems.push(
          `${where(doc)}: webhook ${String(hook['name'])} calls port ${port}, which Service ${String(svc['name'])} does not expose`,
        );
      }
    }
    const inject = obj(obj(doc.value['metadata'])['annotations'])['cert-manager.io/inject-ca-from'];
    if (typeof inject === 'string' && !docs.some((d) => kindOf(d) === 'Certificate' && nameOf(d) === inject.split('/')[1])) {
      problems.push(`${where(doc)}: cert-manager.io/inject-ca-from names Certificate ${inject}, which is not defined`);
    }
  }
  return problems;
}

/** Workloads: selector matches the template, containers are named and have an image, probes hit real ports. */
export function checkWorkloads(docs: readonly ManifestDoc[]): string[] {
  const problems: string[] = [];
  for (const doc of docs.filter((d) => WORKLOAD_KINDS.has(kindOf(d)))) {
    const template = podTemplateOf(doc);
    if (!template) continue;
    const matchLabels = obj(obj(obj(doc.value['spec'])['selector'])['matchLabels']);
    if (kindOf(doc) !== 'Job' && kindOf(doc) !== 'CronJob' && !selects(matchLabels, template.labels)) {
      problems.push(`${where(doc)}: spec.selector.matchLabels does not match the pod template labels`);
    }
    const containers = containersOf(template.spec);
    if (containers.length === 0) problems.push(`${where(doc)}: no containers`);
    for (const c of containers) {
      if (!c.name || !c.image) problems.push(`${where(doc)}: a container needs a name and an image`);
      // Kubernetes expands $(VAR) in command and args only for variables the container's env defines;
      // anything else stays literal text, a silent bug.
      const defined = new Set(list(c.raw['env']).map((e) => String(e['name'])));
      for (const ref of [...c.command, ...c.args].flatMap((a) => [...a.matchAll(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g)].map((m) => m[1]))) {
        if (!defined.has(ref)) problems.push(`${where(doc)}: container ${c.name} uses $(${ref}) but defines no env var ${ref}`);
      }
      for (const probe of ['startupProbe', 'readinessProbe', 'livenessProbe']) {
        const http = obj(obj(c.raw[probe])['httpGet']);
        if (Object.keys(http).length > 0 && resolvePort(c, http['port']) === undefined) {
          problems.push(`${where(doc)}: container ${c.name} ${probe} port ${String(http['port'])} is not one of its ports`);
        }
      }
    }
  }
  return problems;
}

/**
 * References between the objects of one deployable unit (a kustomization's output or one example file):
 * service accounts, ConfigMaps, Secrets and claims used by pods, RBAC bindings, HPA targets, and PDB and Service
 * selectors that select some pod template. References marked `optional: true` may point outside the unit.
 */
export function checkReferences(docs: readonly ManifestDoc[]): string[] {
  const problems: string[] = [];
  const names = (kind: string) => new Set(docs.filter((d) => kindOf(d) === kind).map(nameOf));
  const serviceAccounts = names('ServiceAccount');
  const configMaps = names('ConfigMap');
  // cert-manager writes the Secret a Certificate names.
  const secrets = new Set([
    ...names('Secret'),
    ...docs.filter((d) => kindOf(d) === 'Certificate').map((d) => String(obj(d.value['spec'])['secretName'])),
  ]);
  const claims = names('PersistentVolumeClaim');
  const templates = docs.map((d) => ({ doc: d, template: podTemplateOf(d) })).filter((t) => t.template);
  const volumeClaimTemplates = new Set(
    docs
      .filter((d) => kindOf(d) === 'StatefulSet')
      .flatMap((d) => list(obj(d.value['spec'])['volumeClaimTemplates']).map((t) => String(obj(t['metadata'])['name']))),
  );

  for (const { doc, template } of templates) {
    const refs = referencesOf(template?.spec ?? {});
    if (refs.serviceAccount && refs.serviceAccount !== 'default' && !serviceAccounts.has(refs.serviceAccount)) {
      problems.push(`${where(doc)}: serviceAccountName ${refs.serviceAccount} is not defined`);
    }
    for (const n of refs.configMaps) if (!configMaps.has(n)) problems.push(`${where(doc)}: ConfigMap ${n} is not defined`);
    for (const n of refs.secrets) {
      if (!secrets.has(n)) problems.push(`${where(doc)}: Secret ${n} is not defined (mark the reference optional if users bring it)`);
    }
    for (const n of refs.claims) if (!claims.has(n)) problems.push(`${where(doc)}: PersistentVolumeClaim ${n} is not defined`);
    const volumes = new Set([
      ...list(template?.spec['volumes']).map((v) => String(v['name'])),
      ...(kindOf(doc) === 'StatefulSet' ? volumeClaimTemplates : []),
    ]);
    for (const c of containersOf(template?.spec ?? {})) {
      for (const m of list(c.raw['volumeMounts'])) {
        if (!volumes.has(String(m['name']))) {
          problems.push(`${where(doc)}: container ${c.name} mounts volume ${String(m['name'])}, which the pod does not declare`);
        }
      }
    }
  }
  for (const doc of docs) {
    const kind = kindOf(doc);
    const spec = obj(doc.value['spec']);
    if (kind === 'RoleBinding' || kind === 'ClusterRoleBinding') {
      const roleRef = obj(doc.value['roleRef']);
      if (!names(String(roleRef['kind'])).has(String(roleRef['name']))) {
        problems.push(`${where(doc)}: roleRef ${String(roleRef['kind'])}/${String(roleRef['name'])} is not defined`);
      }
      for (const s of list(doc.value['subjects'])) {
        if (s['kind'] === 'ServiceAccount' && !serviceAccounts.has(String(s['name']))) {
          problems.push(`${where(doc)}: subject ServiceAccount ${String(s['name'])} is not defined`);
        }
      }
    }
    if (kind === 'HorizontalPodAutoscaler') {
      const target = obj(spec['scaleTargetRef']);
      if (!names(String(target['kind'])).has(String(target['name']))) {
        problems.push(`${where(doc)}: scaleTargetRef ${String(target['kind'])}/${String(target['name'])} is not defined`);
      }
    }
    if (kind === 'PodDisruptionBudget') {
      const selector = obj(obj(spec['selector'])['matchLabels']);
      if (!templates.some((t) => selects(selector, t.template?.labels ?? {})))
        problems.push(`${where(doc)}: selector matches no pod template`);
    }
    if (kind === 'Service') {
      const selector = obj(spec['selector']);
      const selected = templates.filter((t) => selects(selector, t.template?.labels ?? {}));
      if (Object.keys(selector).length > 0 && selected.length === 0) problems.push(`${where(doc)}: selector matches no pod template`);
      for (const port of list(spec['ports'])) {
        const target = port['targetPort'] ?? port['port'];
        const served = selected.some((t) => containersOf(t.template?.spec ?? {}).some((c) => resolvePort(c, target) !== undefined));
        if (selected.length > 0 && typeof target === 'string' && !served) {
          problems.push(`${where(doc)}: targetPort ${target} is no container port of the selected pods`);
        }
      }
    }
  }
  return problems;
}

function flagValue(args: readonly string[], flag: string): string | undefined {
  const i = args.indexOf(flag);
  if (i >= 0) return args[i + 1];
  const inline = args.find((a) => a.startsWith(`${flag}=`));
  return inline?.slice(flag.length + 1);
}

function checkTriadService(doc: ManifestDoc, c: Container, annotations: Readonly<Record<string, string>>, service: string): string[] {
  const problems: string[] = [];
  const at = `${where(doc)} container ${c.name} (triad ${service})`;
  const opsPort = Number(flagValue(c.args, '--metrics-port'));
  if (!opsPort) problems.push(`${at}: give --metrics-port explicitly, so probes and scraping agree on it`);
  const probe = (name: string, path: string) => {
    const http = obj(obj(c.raw[name])['httpGet']);
    if (http['path'] !== path || resolvePort(c, http['port']) !== opsPort) {
      problems.push(`${at}: ${name} must GET ${path} on the ops port ${opsPort}`);
    }
  };
  probe('readinessProbe', '/readyz');
  probe('livenessProbe', '/healthz');
  // The ops port answers /healthz before NATS is reached; the startup probe holds liveness off while the process
  // boots, and readiness (503 "waiting for NATS at ...") keeps traffic away without restarting the pod.
  probe('startupProbe', '/healthz');
  const requests = obj(obj(c.raw['resources'])['requests']);
  if (!requests['cpu'] || !requests['memory']) problems.push(`${at}: resources.requests needs cpu and memory`);
  const env = new Map(list(c.raw['env']).map((e) => [String(e['name']), obj(obj(e['valueFrom'])['fieldRef'])['fieldPath']]));
  if (env.get('POD_NAME') !== 'metadata.name') problems.push(`${at}: POD_NAME must come from the downward API (metadata.name)`);
  if (env.get('POD_NAMESPACE') !== 'metadata.namespace') {
    problems.push(`${at}: POD_NAMESPACE must come from the downward API (metadata.namespace)`);
  }
  if (annotations['prometheus.io/scrape'] !== 'true' || Number(annotations['prometheus.io/port']) !== opsPort) {
    problems.push(`${at}: pod annotations prometheus.io/scrape "true" and prometheus.io/port "${opsPort}" are required`);
  }
  return problems;
}

/**
 * Containers of the Triad image run real CLI commands with flags the command accepts (as its `--help` says);
 * the gateway, scheduler and pod-watcher also get probes and scrape annotations on their ops port, resource
 * requests and the downward-API pod identity.
 */
export function checkTriadContainers(
  docs: readonly ManifestDoc[],
  commands: ReadonlySet<string>,
  help: ReadonlyMap<string, CommandHelp>,
): string[] {
  const problems: string[] = [];
  for (const doc of docs) {
    const template = podTemplateOf(doc);
    if (!template) continue;
    for (const c of containersOf(template.spec)) {
      if (c.image.split(/[:@]/)[0] !== TRIAD_IMAGE) continue;
      const [bin, command, ...rest] = [...c.command, ...c.args];
      const at = `${where(doc)} container ${c.name}`;
      if (bin !== 'triad' || !command || !commands.has(command)) {
        problems.push(
          `${at}: must run \`triad <command>\` with a command of the CLI (${[...commands].join(', ')}), not ` +
            `\`${[bin, command].join(' ')}\``,
        );
        continue;
      }
      const answer = help.get(command);
      if (!answer || !answer.ok) {
        problems.push(`${at}: cannot check its flags: ${answer && !answer.ok ? answer.error : 'no help asked'}`);
      } else {
        for (const arg of rest.filter((a) => a.startsWith('--'))) {
          const flag = arg.split('=')[0];
          if (!answer.flags.has(flag)) problems.push(`${at}: \`triad ${command}\` has no flag ${flag}`);
        }
      }
      if (TRIAD_SERVICES.has(command)) problems.push(...checkTriadService(doc, c, template.annotations, command));
    }
  }
  return problems;
}

/**
 * Prometheus Operator PodMonitors of a unit: each selects some pod template, scrapes a named port its containers
 * declare, and takes its job name from a label those pods carry. When a unit has PodMonitors, every Triad service
 * (gateway, scheduler, pod-watcher) in it is selected by one, scraped on the port of its --metrics-port.
 */
export function checkMonitors(docs: readonly ManifestDoc[]): string[] {
  const problems: string[] = [];
  const monitors = docs.filter((d) => kindOf(d) === 'PodMonitor');
  if (monitors.length === 0) return problems;
  const templates = docs.map((d) => ({ doc: d, template: podTemplateOf(d) })).filter((t) => t.template);
  const scraped = new Map<ManifestDoc, Set<number>>();
  for (const m of monitors) {
    const spec = obj(m.value['spec']);
    const selected = templates.filter((t) => selects(obj(obj(spec['selector'])['matchLabels']), t.template?.labels ?? {}));
    if (selected.length === 0) {
      problems.push(`${where(m)}: selector matches no pod template`);
      continue;
    }
    const jobLabel = spec['jobLabel'];
    for (const t of selected) {
      if (typeof jobLabel === 'string' && t.template?.labels[jobLabel] === undefined) {
        problems.push(`${where(m)}: jobLabel ${jobLabel} is not a label of the pods of ${where(t.doc)}`);
      }
      for (const endpoint of list(spec['podMetricsEndpoints'])) {
        const path = endpoint['path'] ?? '/metrics';
        if (path !== '/metrics') problems.push(`${where(m)}: Triad serves metrics on /metrics, not ${String(path)}`);
        const ports = containersOf(t.template?.spec ?? {})
          .map((c) => resolvePort(c, endpoint['port']))
          .filter((p) => p !== undefined);
        if (typeof endpoint['port'] !== 'string' || ports.length === 0) {
          problems.push(`${where(m)}: port ${String(endpoint['port'])} is no named container port of ${where(t.doc)}`);
        }
        const set = scraped.get(t.doc) ?? new Set<number>();
        for (const p of ports) set.add(p);
        scraped.set(t.doc, set);
      }
    }
  }
  for (const { doc, template } of templates) {
    for (const c of containersOf(template?.spec ?? {})) {
      const [bin, command] = [...c.command, ...c.args];
      if (c.image.split(/[:@]/)[0] !== TRIAD_IMAGE || bin !== 'triad' || !TRIAD_SERVICES.has(command ?? '')) continue;
      const opsPort = Number(flagValue(c.args, '--metrics-port'));
      if (scraped.get(doc)?.has(opsPort)) continue;
      problems.push(`${where(doc)}: triad ${command} is scraped by no PodMonitor on its ops port ${opsPort}`);
    }
  }
  return problems;
}

/** The Triad commands the containers of the Triad image run (to ask their `--help` once). */
export function triadCommandsUsed(docs: readonly ManifestDoc[]): string[] {
  return docs
    .flatMap((d) => containersOf(podTemplateOf(d)?.spec ?? {}))
    .filter((c) => c.image.split(/[:@]/)[0] === TRIAD_IMAGE)
    .map((c) => [...c.command, ...c.args][1])
    .filter((c): c is string => typeof c === 'string' && !c.startsWith('-'));
}

/**
 * Each ModelServer shipped with its workloads gets a pod template for every role its pipeline mode needs, the
 * template's labels classify to that role, and its container listens on the role's port.
 */
export function checkModelServerWorkloads(docs: readonly ManifestDoc[]): string[] {
  const problems: string[] = [];
  const templates = docs.map((d) => ({ doc: d, template: podTemplateOf(d) })).filter((t) => t.template);
  if (templates.length === 0) return problems;
  for (const doc of docs.filter((d) => kindOf(d) === 'ModelServer')) {
    const result = validateResource(doc.value);
    if (result.status !== 'valid') continue;
    const ms = result.value as ModelServer;
    const mode = resolvePipelineMode(ms.spec);
    const pd = ms.spec.workloadSelector.pdGroup;
    const hasPrefill = Object.keys(pd?.prefillLabels ?? {}).length > 0;
    const needed =
      mode === 'aggregated'
        ? ['aggregated']
        : mode === 'pd'
          ? ['prefill', 'decode']
          : hasPrefill
            ? ['encode', 'prefill', 'decode']
            : ['encode', 'decode'];
    for (const role of needed) {
      const serving = templates.filter((t) => classifyPod(ms.spec, t.template?.labels).role === role);
      if (serving.length === 0) {
        problems.push(`${where(doc)}: no pod template plays its ${role} role`);
        continue;
      }
      const port = rolePort(ms.spec, role as 'encode' | 'prefill' | 'decode' | 'aggregated');
      for (const t of serving) {
        const ports = containersOf(t.template?.spec ?? {}).flatMap((c) => list(c.raw['ports']).map((p) => p['containerPort']));
        if (!ports.includes(port)) {
          problems.push(`${where(t.doc)}: plays ${role} for ModelServer ${ms.metadata.name} but no container declares port ${port}`);
        }
      }
    }
  }
  return problems;
}

/** The scheduler config shipped in a ConfigMap passes the scheduler's own schema. */
export function checkSchedulerConfigs(docs: readonly ManifestDoc[]): string[] {
  const problems: string[] = [];
  for (const doc of docs.filter((d) => kindOf(d) === 'ConfigMap')) {
    const text = obj(doc.value['data'])['scheduler.yaml'];
    if (typeof text !== 'string') continue;
    const parsed = SchedulerConfigSchema.safeParse(parseYaml(text) ?? {});
    if (!parsed.success) {
      problems.push(...parsed.error.issues.map((i) => `${where(doc)}: scheduler.yaml ${i.path.join('.')}: ${i.message}`));
    }
  }
  return problems;
}
