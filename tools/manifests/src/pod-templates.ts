import { kindOf, type ManifestDoc } from './documents';

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Obj) : {});
const list = (v: unknown): Obj[] => (Array.isArray(v) ? v.map(obj) : []);

/** The pod template of a workload (labels and spec), or undefined for kinds without one. */
export interface PodTemplate {
  readonly labels: Readonly<Record<string, string>>;
  readonly annotations: Readonly<Record<string, string>>;
  readonly spec: Obj;
}

export function podTemplateOf(doc: ManifestDoc): PodTemplate | undefined {
  const spec = obj(doc.value['spec']);
  let template: Obj | undefined;
  switch (kindOf(doc)) {
    case 'Deployment':
    case 'StatefulSet':
    case 'DaemonSet':
    case 'Job':
      template = obj(spec['template']);
      break;
    case 'CronJob':
      template = obj(obj(obj(spec['jobTemplate'])['spec'])['template']);
      break;
    default:
      return undefined;
  }
  const meta = obj(template['metadata']);
  return {
    labels: obj(meta['labels']) as Record<string, string>,
    annotations: obj(meta['annotations']) as Record<string, string>,
    spec: obj(template['spec']),
  };
}

export interface Container {
  readonly name: string;
  readonly image: string;
  readonly command: readonly string[];
  readonly args: readonly string[];
  readonly raw: Obj;
}

/** Init and regular containers of a pod spec. */
export function containersOf(podSpec: Obj): Container[] {
  return [...list(podSpec['initContainers']), ...list(podSpec['containers'])].map((c) => ({
    name: String(c['name'] ?? ''),
    image: String(c['image'] ?? ''),
    command: Array.isArray(c['command']) ? c['command'].map(String) : [],
    args: Array.isArray(c['args']) ? c['args'].map(String) : [],
    raw: c,
  }));
}

/** The number behind a container port reference (a number, or the name of one of the container's ports). */
export function resolvePort(container: Container, port: unknown): number | undefined {
  if (typeof port === 'number') return port;
  if (typeof port === 'string' && /^\d+$/.test(port)) return Number(port);
  const found = list(container.raw['ports']).find((p) => p['name'] === port);
  return typeof found?.['containerPort'] === 'number' ? found['containerPort'] : undefined;
}

/** Every `name` of the objects a pod spec or container references, by kind of reference. */
export interface PodReferences {
  readonly serviceAccount?: string;
  readonly configMaps: readonly string[];
  readonly secrets: readonly string[];
  readonly claims: readonly string[];
}

/** References a pod spec makes to other objects; optional ones (`optional: true`) are left out. */
export function referencesOf(podSpec: Obj): PodReferences {
  const configMaps: string[] = [];
  const secrets: string[] = [];
  const claims: string[] = [];
  const required = (ref: Obj) => ref['optional'] !== true;
  for (const volume of list(podSpec['volumes'])) {
    const cm = obj(volume['configMap']);
    if (cm['name'] && required(cm)) configMaps.push(String(cm['name']));
    const secret = obj(volume['secret']);
    if (secret['secretName'] && required(secret)) secrets.push(String(secret['secretName']));
    const pvc = obj(volume['persistentVolumeClaim']);
    if (pvc['claimName']) claims.push(String(pvc['claimName']));
  }
  for (const c of containersOf(podSpec)) {
    for (const from of list(c.raw['envFrom'])) {
      const cm = obj(from['configMapRef']);
      if (cm['name'] && required(cm)) configMaps.push(String(cm['name']));
      const secret = obj(from['secretRef']);
      if (secret['name'] && required(secret)) secrets.push(String(secret['name']));
    }
    for (const env of list(c.raw['env'])) {
      const valueFrom = obj(env['valueFrom']);
      const cm = obj(valueFrom['configMapKeyRef']);
      if (cm['name'] && required(cm)) configMaps.push(String(cm['name']));
      const secret = obj(valueFrom['secretKeyRef']);
      if (secret['name'] && required(secret)) secrets.push(String(secret['name']));
    }
  }
  const sa = podSpec['serviceAccountName'];
  return { ...(typeof sa === 'string' ? { serviceAccount: sa } : {}), configMaps, secrets, claims };
}

/** True when every selector label is on the pod template (an empty selector selects nothing here). */
export function selects(selector: Readonly<Record<string, unknown>>, labels: Readonly<Record<string, string>>): boolean {
  const entries = Object.entries(selector);
  return entries.length > 0 && entries.every(([k, v]) => labels[k] === v);
}

export { obj, list };
