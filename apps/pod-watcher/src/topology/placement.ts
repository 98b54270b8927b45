import {
  DEFAULT_MOONCAKE_BOOTSTRAP_PORT,
  DEFAULT_SGLANG_BOOTSTRAP_PORT,
  ENCODER_BOOTSTRAP_PORT_ANNOTATION,
  annotatedPortFor,
  classifyPod,
  defaultEcControlAddresses,
  ecControlOf,
  isPodReady,
  isPushEcConnector,
  resolvePipelineMode,
  rolePort,
  staticBootstrapPort,
  type BootstrapPortSource,
  type InferenceEngine,
  type ModelServer,
  type MooncakeImplementation,
  type PipelineMode,
  type Pod,
  type Role,
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
  /**
   * Prefill bootstrap port from static configuration: SGLang (the engine's `/server_info` wins once read), and vLLM
   * with `kvConnector: mooncake` (where the pod-watcher asks `GET /query`).
   */
  readonly bootstrapPort?: number;
  /** vLLM prefill with `kvConnector: mooncake`: the ModelServer's `kvConnector.implementation` (`auto`: probe it). */
  readonly mooncake?: MooncakeImplementation;
  readonly bootstrapPortSource?: BootstrapPortSource;
  readonly engine: InferenceEngine;
  readonly mode: PipelineMode;
  /**
   * SGLang EPD: this pod is a language-only server whose encoder registry the watcher keeps (the prefill, or in E→PD
   * the pods classified as decode, which prefill themselves).
   */
  readonly registryOwner?: boolean;
  /** Registry owners: `triad.io/encoder-bootstrap-port`, which overrides the port `/server_info` reports. */
  readonly encoderBootstrapPort?: number;
  /** Port annotations that were ignored, and why (logged when the placement appears or changes). */
  readonly problems?: readonly string[];
  /** The engine's KV-event sockets (pod annotations), when it publishes events. */
  readonly kvEvents?: KvEventsPlacement;
  /** vLLM: data-parallel ranks from `triad.io/dp-size` (or the number of EC control addresses). */
  readonly dpSize?: number;
  /** vLLM EPD consumer: EC control address per DP rank (`triad.io/ec-control-addresses` / `-port`). */
  readonly ecControlAddresses?: readonly string[];
}

type VllmEc = Pick<Placement, 'dpSize' | 'ecControlAddresses' | 'problems'>;

/**
 * A vLLM pod's DP size and, for an EPD consumer (the prefill, or the decode pods of E→PD, which prefill
 * themselves), its EC control addresses, from the pod annotations.
 */
function vllmEcOf(ms: ModelServer, pod: Pod, role: Role, mode: PipelineMode): VllmEc {
  if (ms.spec.inferenceEngine !== 'vLLM') return {};
  const ec = ecControlOf(pod.metadata.annotations, pod.status?.podIP ?? '');
  const prefillsItself = Object.keys(ms.spec.workloadSelector.pdGroup?.prefillLabels ?? {}).length === 0;
  const consumer = mode === 'epd' && (role === 'prefill' || (role === 'decode' && prefillsItself));
  // A push (Mooncake) consumer without annotations listens where vLLM's defaults put it, on the pod IP (ec_ip).
  const podIp = pod.status?.podIP;
  const defaulted =
    consumer && ec.addresses === undefined && isPushEcConnector(ms.spec.ecConnector?.type) && podIp
      ? defaultEcControlAddresses(podIp, ec.dpSize ?? 1)
      : undefined;
  const addresses = ec.addresses ?? defaulted;
  return {
    ...(ec.dpSize !== undefined ? { dpSize: ec.dpSize } : {}),
    ...(consumer && addresses !== undefined ? { ecControlAddresses: addresses } : {}),
    ...(ec.problems.length > 0 ? { problems: ec.problems } : {}),
  };
}

type VllmMooncake = Pick<Placement, 'bootstrapPort' | 'bootstrapPortSource' | 'mooncake' | 'problems'>;

/**
 * A vLLM prefill of a ModelServer with `kvConnector: mooncake`: its bootstrap port (`triad.io/bootstrap-port`, then
 * `sglang.ai/bootstrap-port`, then the ModelServer's `bootstrapPort`, then vLLM's default 8998 — the same order as
 * SGLang's) and which Mooncake connector the ModelServer says it runs.
 */
function vllmMooncakeOf(ms: ModelServer, pod: Pod, role: Role, port: number, mode: PipelineMode): VllmMooncake {
  if (ms.spec.inferenceEngine !== 'vLLM' || mode === 'aggregated' || role !== 'prefill' || ms.spec.kvConnector?.type !== 'mooncake')
    return {};
  const b = staticBootstrapPort(pod.metadata.annotations, port, ms.spec.bootstrapPort, DEFAULT_MOONCAKE_BOOTSTRAP_PORT);
  return {
    bootstrapPort: b.port,
    bootstrapPortSource: b.source,
    mooncake: ms.spec.kvConnector.implementation ?? 'auto',
    ...(b.problems.length > 0 ? { problems: b.problems } : {}),
  };
}

type SglangPorts = Pick<Placement, 'bootstrapPort' | 'bootstrapPortSource' | 'registryOwner' | 'encoderBootstrapPort' | 'problems'>;

/**
 * The SGLang side ports of a placement: a prefill's bootstrap port (`triad.io/bootstrap-port`, then SMG's
 * `sglang.ai/bootstrap-port`, then the ModelServer's, then 8998) and a language-only server's registry port override.
 */
function sglangPortsOf(ms: ModelServer, pod: Pod, role: Role, port: number, mode: PipelineMode): SglangPorts {
  if (ms.spec.inferenceEngine !== 'SGLang') return {};
  const problems: string[] = [];
  const out: { -readonly [K in keyof SglangPorts]: SglangPorts[K] } = {};
  if (role === 'prefill') {
    const b = staticBootstrapPort(pod.metadata.annotations, port, ms.spec.bootstrapPort, DEFAULT_SGLANG_BOOTSTRAP_PORT);
    out.bootstrapPort = b.port;
    out.bootstrapPortSource = b.source;
    problems.push(...b.problems);
  }
  // E→PD (`prefillLabels: {}` or none): the decode pods prefill themselves and own the encoder registry.
  const prefillsItself = Object.keys(ms.spec.workloadSelector.pdGroup?.prefillLabels ?? {}).length === 0;
  if (mode === 'epd' && (role === 'prefill' || (role === 'decode' && prefillsItself))) {
    out.registryOwner = true;
    const e = annotatedPortFor(pod.metadata.annotations, ENCODER_BOOTSTRAP_PORT_ANNOTATION, port);
    if (e.port !== undefined) out.encoderBootstrapPort = e.port;
    if (e.problem) problems.push(e.problem);
  }
  if (problems.length > 0) out.problems = problems;
  return out;
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
    const port = rolePort(ms.spec, c.role);
    const kvEvents = kvEventsOf(pod);
    const sglang = sglangPortsOf(ms, pod, c.role, port, mode);
    const vllm = vllmEcOf(ms, pod, c.role, mode);
    const mooncake = vllmMooncakeOf(ms, pod, c.role, port, mode);
    const problems = [...(sglang.problems ?? []), ...(vllm.problems ?? []), ...(mooncake.problems ?? [])];
    out.push({
      key: endpointKey(namespace, ms.metadata.name, pod.metadata.name),
      namespace,
      modelServer: ms.metadata.name,
      pod: pod.metadata.name,
      role: c.role,
      ...(c.group !== undefined ? { group: c.group } : {}),
      ip: pod.status?.podIP as string,
      port,
      engine: ms.spec.inferenceEngine,
      mode,
      ...sglang,
      ...mooncake,
      ...(kvEvents !== undefined ? { kvEvents } : {}),
      ...(vllm.dpSize !== undefined ? { dpSize: vllm.dpSize } : {}),
      ...(vllm.ecControlAddresses !== undefined ? { ecControlAddresses: vllm.ecControlAddresses } : {}),
      ...(problems.length > 0 ? { problems } : {}),
    });
  }
  return out;
}

/** Same fields, same values (placements are flat). */
export function samePlacement(a: Placement, b: Placement): boolean {
  return (
    a.key === b.key &&
    a.role === b.role &&
    a.group === b.group &&
    a.ip === b.ip &&
    a.port === b.port &&
    a.bootstrapPort === b.bootstrapPort &&
    a.bootstrapPortSource === b.bootstrapPortSource &&
    a.mooncake === b.mooncake &&
    a.engine === b.engine &&
    a.mode === b.mode &&
    a.registryOwner === b.registryOwner &&
    a.encoderBootstrapPort === b.encoderBootstrapPort &&
    (a.problems ?? []).join('\n') === (b.problems ?? []).join('\n') &&
    JSON.stringify(a.kvEvents) === JSON.stringify(b.kvEvents) &&
    a.dpSize === b.dpSize &&
    (a.ecControlAddresses ?? []).join(',') === (b.ecControlAddresses ?? []).join(',')
  );
}

/** The address scraped for a placement; pods in several ModelServers on the same port are scraped once. */
export function targetId(p: Pick<Placement, 'ip' | 'port'>): string {
  return p.ip.includes(':') ? `[${p.ip}]:${p.port}` : `${p.ip}:${p.port}`;
}
