import {
  BOOTSTRAP_PORT_ANNOTATION, DEFAULT_SGLANG_BOOTSTRAP_PORT, classifyPod, resolvePipelineMode, rolePort,
  type ModelRoute, type ModelServer, type Pod,
} from '@triad/crd';

export type SimEngineKind = 'vllm' | 'sglang';
export type SimRole = 'encode' | 'prefill' | 'decode' | 'both';

/** One engine sim to run for one loopback pod, derived from the ModelServer that selects the pod. */
export interface SimSpec {
  /** `namespace/pod`: identifies the sim across config reloads. */
  readonly key: string;
  readonly modelServer: string;
  readonly engine: SimEngineKind;
  readonly role: SimRole;
  readonly host: string;
  readonly port: number;
  readonly model: string;
  /** SGLang prefill only: the bootstrap server port. */
  readonly bootstrapPort?: number;
  /** SGLang EPD prefill: a `--language-only` server that calls its encoders itself. */
  readonly languageOnly?: boolean;
  /** vLLM EPD: encoders write and consumers read the shared EC store. */
  readonly usesSharedEc: boolean;
  readonly loraAdapters: readonly string[];
}

export interface SimPlan {
  readonly sims: readonly SimSpec[];
  /** Pods that get no sim, and why, for the user. */
  readonly notes: readonly string[];
}

/** True for addresses of the loopback interface (127.0.0.0/8 and ::1), where `triad up` can host a sim. */
export function isLoopbackAddress(ip: string): boolean {
  if (ip === '::1') return true;
  const m = /^127\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(ip);
  return !!m && m.slice(1).every((o) => Number(o) <= 255);
}

/** The model name a sim serves: the ModelServer's `model`, else the name clients use in a route to it. */
function servedModel(ms: ModelServer, routes: readonly ModelRoute[]): string {
  if (ms.spec.model) return ms.spec.model;
  const route = routes.find((r) => targetsServer(r, ms));
  return route?.spec.modelName ?? ms.metadata.name;
}

function targetsServer(route: ModelRoute, ms: ModelServer): boolean {
  return route.metadata.namespace === ms.metadata.namespace
    && (route.spec.rules ?? []).some((rule) => rule.targetModels.some((t) => t.modelServerName === ms.metadata.name));
}

function loraAdaptersOf(ms: ModelServer, routes: readonly ModelRoute[]): string[] {
  const names = routes.filter((r) => targetsServer(r, ms)).flatMap((r) => r.spec.loraAdapters ?? []);
  return [...new Set(names)];
}

function bootstrapPortOf(pod: Pod, ms: ModelServer): number {
  const annotated = Number(pod.metadata.annotations?.[BOOTSTRAP_PORT_ANNOTATION]);
  if (Number.isInteger(annotated) && annotated > 0 && annotated < 65536) return annotated;
  return ms.spec.bootstrapPort ?? DEFAULT_SGLANG_BOOTSTRAP_PORT;
}

type Classified = { readonly ms: ModelServer; readonly role: 'encode' | 'prefill' | 'decode' | 'aggregated' };

/** Maps a pod's role for a ModelServer to what its sim must do. */
function simFor(pod: Pod, ip: string, { ms, role }: Classified, routes: readonly ModelRoute[]): SimSpec {
  const engine: SimEngineKind = ms.spec.inferenceEngine === 'SGLang' ? 'sglang' : 'vllm';
  const mode = resolvePipelineMode(ms.spec);
  // E→PD (epd with `prefillLabels: {}` or none): the pods classified as decode do prefill and decode themselves.
  const prefillsItself = mode === 'epd' && Object.keys(ms.spec.workloadSelector.pdGroup?.prefillLabels ?? {}).length === 0;
  const simRole: SimRole = role === 'aggregated' || (role === 'decode' && prefillsItself) ? 'both' : role;
  const sglangPrefill = engine === 'sglang' && simRole === 'prefill';
  return {
    key: `${pod.metadata.namespace}/${pod.metadata.name}`,
    modelServer: `${ms.metadata.namespace}/${ms.metadata.name}`,
    engine,
    role: simRole,
    host: ip,
    port: rolePort(ms.spec, role),
    model: servedModel(ms, routes),
    ...(sglangPrefill ? { bootstrapPort: bootstrapPortOf(pod, ms) } : {}),
    // In SGLang EPD the prefill (or E→PD server) is the `--language-only` side that calls the encoders.
    ...(engine === 'sglang' && mode === 'epd' && simRole !== 'encode' && simRole !== 'decode' ? { languageOnly: true } : {}),
    usesSharedEc: engine === 'vllm' && mode === 'epd' && simRole !== 'decode',
    loraAdapters: loraAdaptersOf(ms, routes),
  };
}

/**
 * Decides which engine sims `triad up` runs: one per pod whose IP is on the loopback interface, playing the role
 * the selecting ModelServer gives it. Pods elsewhere are left alone (they may be real engines this machine can
 * reach) and reported in `notes`, as are pods no ModelServer selects and address clashes.
 */
export function planSims(modelServers: readonly ModelServer[], modelRoutes: readonly ModelRoute[], pods: readonly Pod[]): SimPlan {
  const sims: SimSpec[] = [];
  const notes: string[] = [];
  const taken = new Map<string, string>();
  for (const pod of pods) {
    const id = `pod ${pod.metadata.namespace}/${pod.metadata.name}`;
    const ip = pod.status?.podIP;
    if (!ip) {
      notes.push(`${id} has no status.podIP: no engine sim started`);
      continue;
    }
    const sameNs = modelServers.filter((ms) => ms.metadata.namespace === pod.metadata.namespace);
    const classified: Classified[] = [];
    for (const ms of sameNs) {
      const c = classifyPod(ms.spec, pod.metadata.labels);
      if (c.role !== 'none') classified.push({ ms, role: c.role });
      else if (!c.reason?.startsWith('labels do not match workloadSelector')) notes.push(`${id} matches ModelServer ${ms.metadata.name} but gets no role: ${c.reason}`);
    }
    if (!isLoopbackAddress(ip)) {
      if (classified.length > 0) notes.push(`${id} has IP ${ip}, which is not a loopback address: no sim started; Triad will route to ${ip} as a real engine`);
      continue;
    }
    const first = classified[0];
    if (!first) {
      notes.push(`${id} (${ip}) is selected by no ModelServer: no engine sim started`);
      continue;
    }
    if (classified.length > 1) {
      const others = classified.slice(1).map((c) => c.ms.metadata.name).join(', ');
      notes.push(`${id} is selected by ${first.ms.metadata.name} and ${others}; its sim plays its ${first.role} role for ${first.ms.metadata.name}`);
    }
    const sim = simFor(pod, ip, first, modelRoutes);
    const addresses = [sim.port, ...(sim.bootstrapPort ? [sim.bootstrapPort] : [])].map((p) => `${ip}:${p}`);
    const clash = addresses.find((a) => taken.has(a));
    if (clash) {
      notes.push(`${id} needs ${clash}, which ${taken.get(clash)} already uses: no engine sim started`);
      continue;
    }
    for (const a of addresses) taken.set(a, id);
    sims.push(sim);
  }
  return { sims, notes };
}
