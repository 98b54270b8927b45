// Fault injection per stage and per pod, through a real gateway to engine-sims on real sockets. Each topology has
// two pods per stage; a scenario makes pod 0 of one stage fail in one way (a 500, a refused connection, a hang past
// the stage budget, a reset half-way through its answer, a failure inside the stream it opened), sends requests, and
// counts what the client saw and what the engines received. The gateway test (apps/gateway/test/reliability/) and the benchmark
// (tools/bench/src/reliability.ts) drive the same scenarios: the test with a few requests and assertions, the
// benchmark with more load and a baseline without retries or ejection.

import { chatBody, counterTotal, FailureTally, forEachConcurrently, sendChat } from './client';

/** The fault modes the matrix injects at every stage (engine-sim fault names). */
export const FAULT_MODES = ['error500', 'refuse', 'hang', 'die-mid-stream'] as const;
/**
 * Faults injected at the final stage only: the engine opens the stream and its first event is the failure (vLLM's
 * `GenerationError`, SGLang's abort after dispatch). Encoders and prefill legs are not streamed.
 */
export const FINAL_STAGE_FAULT_MODES = ['error-in-stream'] as const;
export type FaultModeName = (typeof FAULT_MODES)[number] | (typeof FINAL_STAGE_FAULT_MODES)[number];

/** How the matrix names the fault modes in reports. */
export const FAULT_LABELS: Readonly<Record<FaultModeName, string>> = {
  error500: 'answers 500',
  refuse: 'resets connections',
  hang: 'hangs past the stage budget',
  'die-mid-stream': 'resets mid-answer',
  'error-in-stream': 'fails inside its opened stream',
};

export type StageName = 'encode' | 'prefill' | 'decode' | 'aggregated';
type SimRoleName = 'encode' | 'prefill' | 'decode' | 'both';

/** What the matrix needs of an engine-sim (`SimEngineHandle` of @triad/engine-sim has it all). */
export interface FaultableSim {
  readonly host: string;
  readonly port: number;
  readonly bootstrapPort?: number;
  setFault(fault: { mode: FaultModeName | 'ok'; count?: number; afterTokens?: number }): void;
  clearRequests(): void;
  requests(): readonly {
    readonly method: string;
    readonly path: string;
    readonly headers: Readonly<Record<string, string | string[] | undefined>>;
    readonly body: unknown;
    /** The engine reset the connection on arrival (the refuse fault) and did nothing with the request. */
    readonly refused?: true;
  }[];
}

/** Options the matrix starts its sims with (a subset of engine-sim's `SimEngineOptions`). */
export interface MatrixSimOptions {
  readonly engine: 'vllm' | 'sglang';
  readonly role: SimRoleName;
  readonly host: string;
  readonly model: string;
  readonly latencyProfile: 'zero';
  readonly ecConnector?: 'nixl';
  readonly enableMmEmbeds?: boolean;
  readonly bootstrapPort?: number;
}

/**
 * The stack the matrix runs against: a gateway (`--scheduling in-process` or with the scheduler service) reading
 * the KV records written here, and the ability to start sims next to it.
 */
export interface MatrixStack {
  readonly gatewayUrl: string;
  /** The gateway's Prometheus endpoint (retries are read from `triad_gateway_retries_total`). */
  readonly metricsUrl: string;
  startSim(options: MatrixSimOptions): Promise<FaultableSim>;
  /** Writes a ModelServer record (spec as in the CRD). */
  putServer(name: string, spec: Record<string, unknown>): Promise<void>;
  putRoute(name: string, spec: Record<string, unknown>): Promise<void>;
  /** Writes an endpoint record for `sim`; `extra` holds record fields such as `group`, `metrics`, `bootstrapPort`. */
  putEndpoint(
    server: string,
    pod: string,
    role: 'encode' | 'prefill' | 'decode' | 'aggregated',
    sim: FaultableSim,
    extra: Record<string, unknown>,
  ): Promise<void>;
  /** Resolves once the gateway serves `model`. */
  waitForModel(model: string): Promise<void>;
}

export type TopologyName = 'vllm-aggregated' | 'vllm-pd' | 'vllm-epd' | 'sglang-aggregated' | 'sglang-pd';

interface TopologyDef {
  readonly engine: 'vllm' | 'sglang';
  readonly stages: readonly StageName[];
  readonly spec: Record<string, unknown>;
  readonly multimodal: boolean;
}

export const MATRIX_MODEL = 'Qwen/Qwen2.5-VL-3B-Instruct';
const PORT = { port: 8000, protocol: 'http' };

const TOPOLOGIES: Readonly<Record<TopologyName, TopologyDef>> = {
  'vllm-aggregated': { engine: 'vllm', stages: ['aggregated'], multimodal: false, spec: { inferenceEngine: 'vLLM' } },
  'vllm-pd': {
    engine: 'vllm',
    stages: ['prefill', 'decode'],
    multimodal: false,
    spec: { inferenceEngine: 'vLLM', kvConnector: { type: 'nixl' } },
  },
  'vllm-epd': {
    engine: 'vllm',
    stages: ['encode', 'prefill', 'decode'],
    multimodal: true,
    spec: {
      inferenceEngine: 'vLLM',
      pipelineMode: 'epd',
      kvConnector: { type: 'nixl' },
      // The matrix checks failover to the healthy pod with each leg sent once per engine; the re-encode after a
      // consumer 500 (vLLM's --decode-retries: the same pods once more) is off here and tested in epd-connectors.
      ecConnector: { type: 'nixl', enableMmEmbeds: true, maxEncoderBatch: 16, reencodeAttempts: 0 },
    },
  },
  'sglang-aggregated': { engine: 'sglang', stages: ['aggregated'], multimodal: false, spec: { inferenceEngine: 'SGLang' } },
  'sglang-pd': { engine: 'sglang', stages: ['prefill', 'decode'], multimodal: false, spec: { inferenceEngine: 'SGLang' } },
};

export const TOPOLOGY_NAMES = Object.keys(TOPOLOGIES) as TopologyName[];

export const TOPOLOGY_LABELS: Readonly<Record<TopologyName, string>> = {
  'vllm-aggregated': 'vLLM aggregated',
  'vllm-pd': 'vLLM PD (NIXL)',
  'vllm-epd': 'vLLM EPD (NIXL EC)',
  'sglang-aggregated': 'SGLang aggregated',
  'sglang-pd': 'SGLang PD',
};

/** Whether the topology's requests carry media (EPD). */
export function isMultimodal(topology: TopologyName): boolean {
  return TOPOLOGIES[topology].multimodal;
}

/** The stages of a topology, in pipeline order. */
export function stagesOf(topology: TopologyName): readonly StageName[] {
  return TOPOLOGIES[topology].stages;
}

const ROLE_OF_STAGE: Readonly<Record<StageName, SimRoleName>> = {
  encode: 'encode',
  prefill: 'prefill',
  decode: 'decode',
  aggregated: 'both',
};

/** The sims of one topology: two per stage; pod 0 is the one a scenario makes fail. */
export interface DeployedTopology {
  readonly name: TopologyName;
  readonly sims: Readonly<Partial<Record<StageName, readonly [FaultableSim, FaultableSim]>>>;
}

/** Starts two sims per stage of `topology`, on loopback addresses `${hostPrefix}.${n}`. */
export async function deployTopology(stack: MatrixStack, topology: TopologyName, hostPrefix: string): Promise<DeployedTopology> {
  const def = TOPOLOGIES[topology];
  const sims: Partial<Record<StageName, readonly [FaultableSim, FaultableSim]>> = {};
  let octet = 1;
  for (const stage of def.stages) {
    const start = () =>
      stack.startSim({
        engine: def.engine,
        role: ROLE_OF_STAGE[stage],
        host: `${hostPrefix}.${octet++}`,
        model: MATRIX_MODEL,
        latencyProfile: 'zero',
        ...(def.multimodal ? { ecConnector: 'nixl' as const, enableMmEmbeds: stage !== 'encode' } : {}),
        ...(def.engine === 'sglang' && stage === 'prefill' ? { bootstrapPort: 0 } : {}),
      });
    sims[stage] = [await start(), await start()];
  }
  return { name: topology, sims };
}

/** One scenario: in `topology`, pod 0 of `stage` fails with `fault` for every request it gets. */
export interface FaultScenario {
  readonly topology: TopologyName;
  readonly stage: StageName;
  readonly fault: FaultModeName;
  /**
   * `resilient`: the defaults (retries on the alternates, outlier ejection); `no-retries`: the baseline, with
   * `retry.attempts: 0` and outlier detection off.
   */
  readonly policy: 'resilient' | 'no-retries';
  /**
   * Which requests stream: `mixed` (every other one; but when the final stage resets mid-answer, none, since a
   * stream whose bytes already reached the client cannot be retried), `all` or `none`.
   */
  readonly streaming?: 'mixed' | 'all' | 'none';
}

export interface ScenarioOptions {
  readonly requests: number;
  /** Requests in flight at once (default 1). */
  readonly concurrency?: number;
  /** `trafficPolicy.timeout`: each stage's budget, which a hanging pod runs into (default 1s). */
  readonly stageTimeout?: string;
  /** `outlierDetection.consecutiveErrors` of the resilient policy (default 5, the product default). */
  readonly consecutiveErrors?: number;
  /** Per-request client timeout in ms (default 30 s): a request still unanswered then counts as failed. */
  readonly clientTimeoutMs?: number;
  /** A unique tag for this run (model server names and request ids), so scenarios never share state. */
  readonly tag: string;
}

export interface ScenarioResult {
  readonly scenario: FaultScenario;
  readonly sent: number;
  readonly failed: number;
  /** Failures by reason (HTTP status, `sse-error`, or a transport error name). */
  readonly failures: Readonly<Record<string, number>>;
  /**
   * Requests for which one engine received the same leg (same request id and path) more than once: a retry on
   * the pod that had just failed, or the same work sent twice.
   */
  readonly duplicated: number;
  /**
   * Legs a healthy pod ran for a stage that had already succeeded for that request (e.g. a new prefill after the
   * decode failed): the price of retrying a whole attempt; not a duplicate on one engine.
   */
  readonly rerunLegs: number;
  /**
   * vLLM KV release legs: a one-token decode the gateway sends with a failed attempt's `kv_transfer_params` so the
   * prefill frees the blocks no decode took (docs/kv-ownership.md). They carry the request's id by design, so they
   * are counted here and not as duplicates.
   */
  readonly releaseLegs: number;
  /** Retries the gateway counted (`triad_gateway_retries_total`) during the scenario. */
  readonly retries: number;
  /** Legs the failing pod received. */
  readonly faultyLegs: number;
  /** Requests whose faulted stage was served by the healthy pod of that stage. */
  readonly servedByHealthy: number;
}

/** The row label of a scenario in reports. */
export function scenarioLabel(s: FaultScenario): string {
  const stream = s.streaming === 'all' ? ', streams' : s.streaming === 'none' ? ', non-stream' : '';
  return `${TOPOLOGY_LABELS[s.topology]}: ${s.stage}, 1 of 2 pods ${FAULT_LABELS[s.fault]}${stream}`;
}

let serverCounter = 0;
const RETRIES = 'triad_gateway_retries_total';

function policyOf(s: FaultScenario, o: ScenarioOptions): Record<string, unknown> {
  const timeout = o.stageTimeout ?? '1s';
  if (s.policy === 'no-retries')
    return { timeout, retry: { attempts: 0, retryInterval: '1ms' }, outlierDetection: { consecutiveErrors: 0 } };
  return {
    timeout,
    retry: { attempts: 3, retryInterval: '1ms' },
    outlierDetection: { consecutiveErrors: o.consecutiveErrors ?? 5, baseEjectionTime: '60s' },
  };
}

/** Writes a ModelServer and route of its own for the scenario (fresh outlier state), over the topology's sims. */
function deployScenarioServer(stack: MatrixStack, topo: DeployedTopology, s: FaultScenario, o: ScenarioOptions): Promise<string> {
  return deployServer(stack, topo, `rel-${o.tag}-${++serverCounter}`, policyOf(s, o));
}

/**
 * Writes a ModelServer `name` (model name and route alike) over a topology's sims, with `trafficPolicy` (none: the
 * defaults); resolves once the gateway serves it. Returns the model name.
 */
export async function deployServer(
  stack: MatrixStack,
  topo: DeployedTopology,
  name: string,
  trafficPolicy?: Record<string, unknown>,
  /** Spec fields over the topology's (e.g. another KV connector). */
  specOverrides?: Record<string, unknown>,
): Promise<string> {
  const def = TOPOLOGIES[topo.name];
  const pd = def.stages.length > 1;
  const pdGroup = !pd
    ? undefined
    : def.multimodal
      ? { groupKey: 'g', encodeLabels: { r: 'e' }, prefillLabels: { r: 'p' }, decodeLabels: { r: 'd' } }
      : { groupKey: 'g', prefillLabels: { r: 'p' }, decodeLabels: { r: 'd' } };
  await stack.putServer(name, {
    model: MATRIX_MODEL,
    workloadPort: PORT,
    ...def.spec,
    ...specOverrides,
    ...(trafficPolicy !== undefined ? { trafficPolicy } : {}),
    workloadSelector: { matchLabels: { app: name }, ...(pdGroup ? { pdGroup } : {}) },
  });
  await stack.putRoute(name, { modelName: name, rules: [{ targetModels: [{ modelServerName: name, weight: 100 }] }] });
  const now = Date.now();
  for (const stage of def.stages) {
    const pair = topo.sims[stage] as readonly [FaultableSim, FaultableSim];
    for (const [i, sim] of pair.entries()) {
      // Pod 0 looks the better one by load, so the scheduler keeps choosing it until it is ejected.
      const metrics = { running: 0, waiting: 0, kvCacheUsage: i === 0 ? 0 : 0.3, scrapedAt: now, stale: false };
      await stack.putEndpoint(name, `${stage}-${i}`, stage === 'aggregated' ? 'aggregated' : stage, sim, {
        metrics,
        ...(pd ? { group: 'g1' } : {}),
        ...(sim.bootstrapPort !== undefined ? { bootstrapPort: sim.bootstrapPort } : {}),
      });
    }
  }
  await stack.waitForModel(name);
  return name;
}

/** The stage whose answer the client gets. */
function isFinalStage(stage: StageName): boolean {
  return stage === 'aggregated' || stage === 'decode';
}

function streams(s: FaultScenario, i: number): boolean {
  const mode = s.streaming ?? 'mixed';
  if (mode === 'all') return true;
  if (mode === 'none' || (s.fault === 'die-mid-stream' && isFinalStage(s.stage))) return false;
  return i % 2 === 1;
}

const isInference = (r: { method: string; path: string }) => r.method === 'POST' && (r.path.startsWith('/v1/') || r.path === '/generate');

/** A release leg: one token, not streamed, with the KV a prefill produced (the matrix's own requests ask for 4). */
function isReleaseLeg(body: unknown): boolean {
  if (body === null || typeof body !== 'object') return false;
  const b = body as { max_tokens?: unknown; stream?: unknown; kv_transfer_params?: { do_remote_prefill?: unknown } };
  return b.max_tokens === 1 && b.stream !== true && b.kv_transfer_params?.do_remote_prefill === true;
}

function requestIdOf(r: { headers: Readonly<Record<string, string | string[] | undefined>> }): string {
  const id = r.headers['x-request-id'];
  return typeof id === 'string' ? id : '';
}

/** Runs one scenario against a deployed topology and counts what happened. */
export async function runFaultScenario(
  stack: MatrixStack,
  topo: DeployedTopology,
  scenario: FaultScenario,
  options: ScenarioOptions,
): Promise<ScenarioResult> {
  if (topo.name !== scenario.topology) throw new Error(`scenario for ${scenario.topology} run on ${topo.name}`);
  const model = await deployScenarioServer(stack, topo, scenario, options);
  const all = Object.entries(topo.sims).flatMap(([stage, pair]) =>
    (pair ?? []).map((sim, i) => ({ stage: stage as StageName, sim, faulty: i === 0 && stage === scenario.stage })),
  );
  for (const { sim } of all) {
    sim.setFault({ mode: 'ok' });
    sim.clearRequests();
  }
  const faulty = (topo.sims[scenario.stage] as readonly [FaultableSim, FaultableSim])[0];
  const healthy = (topo.sims[scenario.stage] as readonly [FaultableSim, FaultableSim])[1];
  const retriesBefore = await counterTotal(stack.metricsUrl, RETRIES);
  faulty.setFault({ mode: scenario.fault });
  const tally = new FailureTally();
  const prefix = `${model}-r`;
  const multimodal = isMultimodal(scenario.topology);
  try {
    await forEachConcurrently(options.requests, options.concurrency ?? 1, async (i) => {
      const stream = streams(scenario, i);
      const body = chatBody(model, multimodal, model, i, { max_tokens: 4, stream });
      tally.add((await sendChat(stack.gatewayUrl, body, `${prefix}${i}`, stream, options.clientTimeoutMs ?? 30_000)).why);
    });
  } finally {
    faulty.setFault({ mode: 'ok' });
  }
  const retries = (await counterTotal(stack.metricsUrl, RETRIES)) - retriesBefore;
  // Legs per engine: a request id + path seen twice on one engine is a duplicate.
  const duplicatedIds = new Set<string>();
  /** Successful legs per request, stage and path on healthy pods (an encoder leg's id names its items). */
  const healthyLegs = new Map<string, number>();
  let faultyLegs = 0;
  let releaseLegs = 0;
  const servedByHealthy = new Set<string>();
  for (const { stage, sim, faulty: isFaulty } of all) {
    const seen = new Set<string>();
    for (const r of sim.requests()) {
      if (!isInference(r)) continue;
      const id = requestIdOf(r);
      if (!id.startsWith(prefix)) continue;
      const parent = /^(.*-r\d+)/.exec(id)?.[1] ?? id;
      // An encoder leg's id is `parent:item:random`: the same item sent twice is the same leg.
      if (stage === 'decode' && isReleaseLeg(r.body)) {
        releaseLegs++;
        continue;
      }
      const leg = `${id.replace(/:[0-9a-f]{6}$/, '')}|${r.path}`;
      // A duplicate is work done twice: an arrival the engine reset unread (the refuse fault) did none. The gateway
      // sends a request whose idle kept-alive socket was reset so once more on a new connection (the keep-alive
      // race, docs/gateway.md), which reaches the refusing pod again.
      if (r.refused !== true) {
        if (seen.has(leg)) duplicatedIds.add(parent);
        seen.add(leg);
      }
      if (isFaulty) {
        faultyLegs++;
        continue;
      }
      const key = `${stage}|${leg}`;
      healthyLegs.set(key, (healthyLegs.get(key) ?? 0) + 1);
      if (sim === healthy) servedByHealthy.add(parent);
    }
  }
  let rerunLegs = 0;
  for (const n of healthyLegs.values()) rerunLegs += n - 1;
  return {
    scenario,
    sent: options.requests,
    failed: tally.failed,
    failures: tally.byReason,
    duplicated: duplicatedIds.size,
    rerunLegs,
    releaseLegs,
    retries,
    faultyLegs,
    servedByHealthy: servedByHealthy.size,
  };
}

/** Every (stage, fault) scenario of a topology with the given policy (the final-stage faults at the final stage). */
export function scenariosOf(
  topology: TopologyName,
  policy: FaultScenario['policy'],
  faults: readonly FaultModeName[] = [...FAULT_MODES, ...FINAL_STAGE_FAULT_MODES],
): FaultScenario[] {
  const finalOnly = new Set<FaultModeName>(FINAL_STAGE_FAULT_MODES);
  return stagesOf(topology).flatMap((stage) =>
    faults.filter((fault) => !finalOnly.has(fault) || isFinalStage(stage)).map((fault) => ({ topology, stage, fault, policy })),
  );
}
