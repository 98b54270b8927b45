import {
  DEFAULT_MOONCAKE_BOOTSTRAP_PORT,
  DEFAULT_SGLANG_BOOTSTRAP_PORT,
  DEFAULT_SGLANG_ENCODER_BOOTSTRAP_PORT,
  EC_CONTROL_PORT_ANNOTATION,
  ENCODER_BOOTSTRAP_PORT_ANNOTATION,
  annotatedPortFor,
  classifyPod,
  ecControlOf,
  resolvePipelineMode,
  rolePort,
  staticBootstrapPort,
  type ModelRoute,
  type ModelServer,
  type Pod,
} from '@triad/crd';
import {
  EcConnectorKindSchema,
  VllmKvConnectorSchema,
  type EcConnectorKind,
  type VllmKvConnector,
} from '@triad/engine-sim/connector-kinds';

export type SimEngineKind = 'vllm' | 'sglang';
export type SimRole = 'encode' | 'prefill' | 'decode' | 'both';

/**
 * A vLLM pod's sim runs what the real configuration says its engine runs: the ModelServer's `ecConnector` (type,
 * `enableMmEmbeds`) and the pod annotations the pod-watcher reads (`triad.io/dp-size`, `triad.io/ec-control-port`,
 * `triad.io/ec-control-addresses`). These sim-only annotations override them for one pod (`triad up` reads them,
 * nothing else does), to play an engine whose flags differ from what the router was told: the EC connector, whether
 * it accepts `*_embeds` parts (`--enable-mm-embeds`), its data-parallel size, a Mooncake consumer's control base port.
 */
export const SIM_EC_CONNECTOR_ANNOTATION = 'sim.triad.io/ec-connector';
export const SIM_MM_EMBEDS_ANNOTATION = 'sim.triad.io/enable-mm-embeds';
export const SIM_DP_SIZE_ANNOTATION = 'sim.triad.io/dp-size';
export const SIM_EC_CONTROL_PORT_ANNOTATION = 'sim.triad.io/ec-control-port';
/**
 * The vLLM KV connector a pod's sim runs instead of the one its ModelServer's `kvConnector` implies (`nixl`,
 * `nixl-push`, `mooncake` — upstream vLLM's —, `mooncake-ascend`, `lmcache`): to play a pod that runs another
 * connector than its ModelServer names.
 */
export const SIM_KV_CONNECTOR_ANNOTATION = 'sim.triad.io/kv-connector';
/**
 * The pod annotations that name an engine's KV-event sockets (what the pod-watcher copies onto the endpoint
 * record for the kv-indexer): in the local stack the pod's sim publishes its prefix cache's events there.
 */
export const KV_EVENTS_ENDPOINT_ANNOTATION = 'triad.io/kv-events-endpoint';
export const KV_EVENTS_REPLAY_ANNOTATION = 'triad.io/kv-events-replay-endpoint';
/** vLLM's default Mooncake EC control port. */
export const DEFAULT_EC_CONTROL_PORT = 14579;

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
  /** Bootstrap server port: SGLang prefills, and vLLM prefills running upstream vLLM's Mooncake connector. */
  readonly bootstrapPort?: number;
  /** vLLM P/D: the KV connector the engine runs (absent: NIXL pull). */
  readonly kvConnector?: VllmKvConnector;
  /** vLLM with LMCache: the shared backend its prefills and decodes use (one per ModelServer). */
  readonly lmcacheStore?: string;
  /** SGLang EPD prefill: a `--language-only` server that calls its encoders itself. */
  readonly languageOnly?: boolean;
  /** Language-only servers: the encoder registry listener's port (`triad.io/encoder-bootstrap-port`, else 8997). */
  readonly encoderBootstrapPort?: number;
  /** vLLM EPD: encoders write and consumers read the shared EC store. */
  readonly usesSharedEc: boolean;
  readonly loraAdapters: readonly string[];
  /** vLLM: the EC connector (absent: shared storage). */
  readonly ecConnector?: EcConnectorKind;
  /** vLLM: accepts `*_embeds` parts. */
  readonly enableMmEmbeds?: boolean;
  /** Data-parallel ranks (absent: 1). */
  readonly dataParallel?: number;
  /** vLLM Mooncake EC consumer: control listener base port. */
  readonly ecControlPort?: number;
  /** KV events (`triad.io/kv-events-endpoint` and `-replay-endpoint`): `tcp://*:PORT` bind addresses of rank 0. */
  readonly kvEvents?: { readonly endpoint: string; readonly replayEndpoint?: string };
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
  return (
    route.metadata.namespace === ms.metadata.namespace &&
    (route.spec.rules ?? []).some((rule) => rule.targetModels.some((t) => t.modelServerName === ms.metadata.name))
  );
}

function loraAdaptersOf(ms: ModelServer, routes: readonly ModelRoute[]): string[] {
  const names = routes.filter((r) => targetsServer(r, ms)).flatMap((r) => r.spec.loraAdapters ?? []);
  return [...new Set(names)];
}

/** The port the sim's bootstrap server listens on: what the pod-watcher would read from annotations or the ModelServer. */
function bootstrapPortOf(pod: Pod, ms: ModelServer, port: number): number {
  return staticBootstrapPort(pod.metadata.annotations, port, ms.spec.bootstrapPort, DEFAULT_SGLANG_BOOTSTRAP_PORT).port;
}

/** A vLLM Mooncake prefill's bootstrap port, as the pod-watcher resolves it (annotations, ModelServer, 8998). */
function mooncakeBootstrapPortOf(pod: Pod, ms: ModelServer, port: number): number {
  return staticBootstrapPort(pod.metadata.annotations, port, ms.spec.bootstrapPort, DEFAULT_MOONCAKE_BOOTSTRAP_PORT).port;
}

function encoderBootstrapPortOf(pod: Pod, port: number): number {
  return annotatedPortFor(pod.metadata.annotations, ENCODER_BOOTSTRAP_PORT_ANNOTATION, port).port ?? DEFAULT_SGLANG_ENCODER_BOOTSTRAP_PORT;
}

type Classified = { readonly ms: ModelServer; readonly role: 'encode' | 'prefill' | 'decode' | 'aggregated' };

function positiveIntAnnotation(pod: Pod, name: string, max: number): number | undefined {
  const n = Number(pod.metadata.annotations?.[name]);
  return Number.isInteger(n) && n > 0 && n <= max ? n : undefined;
}

type VllmKnobs = Pick<SimSpec, 'ecConnector' | 'enableMmEmbeds' | 'dataParallel' | 'ecControlPort' | 'kvConnector' | 'lmcacheStore'>;

/**
 * The KV connector a vLLM pod's engine runs, as its ModelServer says (`kvConnector`: Mooncake upstream unless
 * `implementation: vllm-ascend`, NIXL push with `transferMode: push`), or as the pod's sim annotation overrides it.
 */
function simKvConnector(pod: Pod, ms: ModelServer): Pick<SimSpec, 'kvConnector' | 'lmcacheStore'> {
  const override = pod.metadata.annotations?.[SIM_KV_CONNECTOR_ANNOTATION];
  const kv = ms.spec.kvConnector;
  const asked = VllmKvConnectorSchema.safeParse(override);
  let kind: VllmKvConnector | undefined;
  if (asked.success) kind = asked.data;
  else if (kv?.type === 'mooncake') kind = kv.implementation === 'vllm-ascend' ? 'mooncake-ascend' : 'mooncake';
  else if (kv?.type === 'nixl' && kv.transferMode === 'push') kind = 'nixl-push';
  else if (kv?.type === 'lmcache') kind = 'lmcache';
  if (kind === undefined) return {};
  return { kvConnector: kind, ...(kind === 'lmcache' ? { lmcacheStore: `${ms.metadata.namespace}/${ms.metadata.name}` } : {}) };
}

/** The base port of a pod's real EC control addresses, when they are consecutive ports of the pod's own IP. */
function realControlPort(addresses: readonly string[] | undefined, ip: string): number | undefined {
  const ports = (addresses ?? []).map((a) => {
    const m = /^tcp:\/\/(.+):(\d+)$/.exec(a);
    return m && m[1]?.replace(/^\[|\]$/g, '') === ip ? Number(m[2]) : NaN;
  });
  const base = ports[0];
  return base !== undefined && ports.every((p, r) => p === base + r) ? base : undefined;
}

/**
 * A vLLM pod's knobs: the ModelServer's `ecConnector` and the pod's `triad.io/*` EC annotations (what the router is
 * told), each overridden by its SIM_*_ANNOTATION; invalid values are ignored. `notes` gets what the router will
 * not know (a Mooncake consumer without a control address).
 */
function vllmSimKnobs(pod: Pod, ip: string, ms: ModelServer, role: SimRole, notes: string[]): VllmKnobs {
  const annotations = pod.metadata.annotations ?? {};
  const connector = annotations[SIM_EC_CONNECTOR_ANNOTATION];
  const epd = resolvePipelineMode(ms.spec) === 'epd';
  const configured = epd ? ms.spec.ecConnector : undefined;
  const asked = EcConnectorKindSchema.safeParse(connector);
  const ecConnector = asked.success ? asked.data : configured?.type;
  const real = ecControlOf(annotations, ip);
  const dataParallel = positiveIntAnnotation(pod, SIM_DP_SIZE_ANNOTATION, 64) ?? real.dpSize;
  const consumer = ecConnector === 'mooncake' && (role === 'prefill' || role === 'both');
  const realPort = realControlPort(real.addresses, ip);
  // A consumer of a Mooncake ModelServer without annotations gets vLLM's default port on its pod IP from the
  // pod-watcher, where its sim listens; only one the router is not told about needs the note.
  if (consumer && configured?.type !== 'mooncake' && realPort === undefined && annotations[SIM_EC_CONTROL_PORT_ANNOTATION] === undefined) {
    notes.push(
      `pod ${pod.metadata.namespace}/${pod.metadata.name} is a Mooncake EC consumer without ${EC_CONTROL_PORT_ANNOTATION}: ` +
        `its sim listens on ${DEFAULT_EC_CONTROL_PORT}, but the gateway refuses its multimodal requests until the annotation names it`,
    );
  }
  const port = consumer
    ? (positiveIntAnnotation(pod, SIM_EC_CONTROL_PORT_ANNOTATION, 65535) ?? realPort ?? DEFAULT_EC_CONTROL_PORT)
    : undefined;
  const embeds = annotations[SIM_MM_EMBEDS_ANNOTATION];
  const enableMmEmbeds = embeds === 'true' ? true : embeds === 'false' ? false : configured?.enableMmEmbeds === true;
  return {
    ...(ecConnector ? { ecConnector } : {}),
    ...(resolvePipelineMode(ms.spec) === 'aggregated' ? {} : simKvConnector(pod, ms)),
    ...(enableMmEmbeds ? { enableMmEmbeds: true } : {}),
    ...(dataParallel && dataParallel > 1 ? { dataParallel } : {}),
    ...(port !== undefined ? { ecControlPort: port } : {}),
  };
}

/** `tcp://*:5557`, `tcp://:5557`, `5557` or `tcp://<pod IP>:5557` as the sim's bind address; undefined otherwise. */
function kvBindAddress(raw: string | undefined, ip: string): string | undefined {
  const text = raw?.trim() ?? '';
  const m = /^\d+$/.test(text) ? [text, undefined, text] : /^(?:tcp:\/\/)?(\*|\[[^\]]+\]|[^:/]*):(\d+)$/.exec(text);
  if (!m) return undefined;
  const host = m[1];
  const port = Number(m[2]);
  if (!(port >= 1 && port <= 65535) || (host !== undefined && host !== '' && host !== '*' && host !== ip)) return undefined;
  return `tcp://*:${port}`;
}

/** The pod's KV-event sockets, when its annotations name them in a form its sim can bind. */
function kvEventsOf(pod: Pod, ip: string): SimSpec['kvEvents'] {
  const annotations = pod.metadata.annotations ?? {};
  const endpoint = kvBindAddress(annotations[KV_EVENTS_ENDPOINT_ANNOTATION], ip);
  if (!endpoint) return undefined;
  const replayEndpoint = kvBindAddress(annotations[KV_EVENTS_REPLAY_ANNOTATION], ip);
  return { endpoint, ...(replayEndpoint ? { replayEndpoint } : {}) };
}

function portOf(bindAddress: string): number {
  return Number(bindAddress.slice(bindAddress.lastIndexOf(':') + 1));
}

/** Maps a pod's role for a ModelServer to what its sim must do. */
function simFor(pod: Pod, ip: string, { ms, role }: Classified, routes: readonly ModelRoute[], notes: string[]): SimSpec {
  const engine: SimEngineKind = ms.spec.inferenceEngine === 'SGLang' ? 'sglang' : 'vllm';
  const mode = resolvePipelineMode(ms.spec);
  // E→PD (epd with `prefillLabels: {}` or none): the pods classified as decode do prefill and decode themselves.
  const prefillsItself = mode === 'epd' && Object.keys(ms.spec.workloadSelector.pdGroup?.prefillLabels ?? {}).length === 0;
  const simRole: SimRole = role === 'aggregated' || (role === 'decode' && prefillsItself) ? 'both' : role;
  const sglangPrefill = engine === 'sglang' && simRole === 'prefill';
  const knobs = engine === 'vllm' ? vllmSimKnobs(pod, ip, ms, simRole, notes) : {};
  const port = rolePort(ms.spec, role);
  // In SGLang EPD the prefill (or E→PD server) is the `--language-only` side that calls the encoders.
  const languageOnly = engine === 'sglang' && mode === 'epd' && simRole !== 'encode' && simRole !== 'decode';
  // Encoders hold no KV cache.
  const kvEvents = simRole === 'encode' ? undefined : kvEventsOf(pod, ip);
  return {
    key: `${pod.metadata.namespace}/${pod.metadata.name}`,
    modelServer: `${ms.metadata.namespace}/${ms.metadata.name}`,
    engine,
    role: simRole,
    host: ip,
    port,
    model: servedModel(ms, routes),
    ...(sglangPrefill ? { bootstrapPort: bootstrapPortOf(pod, ms, port) } : {}),
    ...(knobs.kvConnector === 'mooncake' && simRole === 'prefill' ? { bootstrapPort: mooncakeBootstrapPortOf(pod, ms, port) } : {}),
    ...(languageOnly ? { languageOnly: true, encoderBootstrapPort: encoderBootstrapPortOf(pod, port) } : {}),
    usesSharedEc:
      engine === 'vllm' && mode === 'epd' && simRole !== 'decode' && (knobs.ecConnector ?? 'shared-storage') === 'shared-storage',
    loraAdapters: loraAdaptersOf(ms, routes),
    ...knobs,
    ...(kvEvents ? { kvEvents } : {}),
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
      else if (!c.reason?.startsWith('labels do not match workloadSelector')) {
        notes.push(`${id} matches ModelServer ${ms.metadata.name} but gets no role: ${c.reason}`);
      }
    }
    if (!isLoopbackAddress(ip)) {
      if (classified.length > 0) {
        notes.push(`${id} has IP ${ip}, which is not a loopback address: no sim started; Triad will route to ${ip} as a real engine`);
      }
      continue;
    }
    const first = classified[0];
    if (!first) {
      notes.push(`${id} (${ip}) is selected by no ModelServer: no engine sim started`);
      continue;
    }
    if (classified.length > 1) {
      const others = classified
        .slice(1)
        .map((c) => c.ms.metadata.name)
        .join(', ');
      notes.push(
        `${id} is selected by ${first.ms.metadata.name} and ${others}; its sim plays its ${first.role} role for ` +
          `${first.ms.metadata.name}`,
      );
    }
    const sim = simFor(pod, ip, first, modelRoutes, notes);
    const base = sim.ecControlPort;
    const controlPorts = base ? Array.from({ length: sim.dataParallel ?? 1 }, (_, r) => base + r) : [];
    const kvPorts = [sim.kvEvents?.endpoint, sim.kvEvents?.replayEndpoint].flatMap((a) =>
      a === undefined ? [] : Array.from({ length: sim.dataParallel ?? 1 }, (_, r) => portOf(a) + r),
    );
    const addresses = [sim.port, sim.bootstrapPort, sim.encoderBootstrapPort, ...controlPorts, ...kvPorts]
      .filter((p) => p !== undefined)
      .map((p) => `${ip}:${p}`);
    const twice = addresses.find((a, i) => addresses.indexOf(a) !== i);
    if (twice) {
      notes.push(`${id} needs ${twice} for two of its listeners: no engine sim started`);
      continue;
    }
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
