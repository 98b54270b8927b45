import {
  BOOTSTRAP_PORT_ANNOTATION, DEFAULT_SGLANG_BOOTSTRAP_PORT, classifyPod, isPodReady, resolvePipelineMode, rolePort,
  type InferenceEngine, type ModelServer, type PipelineMode, type Pod, type Role,
} from '@triad/crd';
import { endpointKey } from '@triad/bus';
import { kvEventsOf, type KvEventsPlacement } from './kv-events-annotations';

/** One Ready pod serving one ModelServer in one role: everything an endpoint record says except metrics. */
export interface Placement {
  /** KV key `ns.modelserver.pod`. */
  readonly key: string;
  readonly namespace: string;
  readonly modelServer: string;
  readonly pod: string;
  readonly role: Role;
  readonly group?: string;
  readonly ip: string;
  readonly port: number;
  readonly bootstrapPort?: number;
  readonly engine: InferenceEngine;
  readonly mode: PipelineMode;
  /** The engine's KV-event sockets (pod annotations), when it publishes events. */
  readonly kvEvents?: KvEventsPlacement;
}

function annotatedPort(pod: Pod): number | undefined {
  const text = pod.metadata.annotations?.[BOOTSTRAP_PORT_ANNOTATION];
  if (text === undefined || !/^\d+$/.test(text)) return undefined;
  const port = Number(text);
  return port >= 1 && port <= 65535 ? port : undefined;
}

/** SGLang prefill pods run a bootstrap server: pod annotation, else the ModelServer's, else SGLang's default. */
function bootstrapPortOf(ms: ModelServer, pod: Pod, role: Role): number | undefined {
  if (ms.spec.inferenceEngine !== 'SGLang' || role !== 'prefill') return undefined;
  return annotatedPort(pod) ?? ms.spec.bootstrapPort ?? DEFAULT_SGLANG_BOOTSTRAP_PORT;
}

/**
 * Classifies every pod of the ModelServer's namespace from scratch: Ready, matching `workloadSelector.matchLabels`,
 * and given a role (and PD group) by the libs/crd role function. Pods without a role are left out. Nothing is
 * carried over from an earlier pass, so a relabelled pod, an edited selector or a new pipelineMode is always seen
 * as it is now (Kthena's index only ever added categories).
 */
export function placePods(ms: ModelServer, pods: Iterable<Pod>): Placement[] {
  const namespace = ms.metadata.namespace;
  const mode = resolvePipelineMode(ms.spec);
  const out: Placement[] = [];
  for (const pod of pods) {
    if (pod.metadata.namespace !== namespace || !isPodReady(pod)) continue;
    const c = classifyPod(ms.spec, pod.metadata.labels);
    if (c.role === 'none') continue;
    const bootstrapPort = bootstrapPortOf(ms, pod, c.role);
    const kvEvents = kvEventsOf(pod);
    out.push({
      key: endpointKey(namespace, ms.metadata.name, pod.metadata.name),
      namespace,
      modelServer: ms.metadata.name,
      pod: pod.metadata.name,
      role: c.role,
      ...(c.group !== undefined ? { group: c.group } : {}),
      ip: pod.status?.podIP as string,
      port: rolePort(ms.spec, c.role),
      ...(bootstrapPort !== undefined ? { bootstrapPort } : {}),
      engine: ms.spec.inferenceEngine,
      mode,
      ...(kvEvents !== undefined ? { kvEvents } : {}),
    });
  }
  return out;
}

/** Same fields, same values (placements are flat). */
export function samePlacement(a: Placement, b: Placement): boolean {
  return a.key === b.key && a.role === b.role && a.group === b.group && a.ip === b.ip && a.port === b.port
    && a.bootstrapPort === b.bootstrapPort && a.engine === b.engine && a.mode === b.mode
    && JSON.stringify(a.kvEvents) === JSON.stringify(b.kvEvents);
}

/** The address scraped for a placement; pods in several ModelServers on the same port are scraped once. */
export function targetId(p: Pick<Placement, 'ip' | 'port'>): string {
  return p.ip.includes(':') ? `[${p.ip}]:${p.port}` : `${p.ip}:${p.port}`;
}
