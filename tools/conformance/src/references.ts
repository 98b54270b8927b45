import type { ModelServerRecord } from '@triad/bus';
import { MODEL, type Bench, type StageSpec } from './bench';
import { answers } from './router';
import type { TriadEndpoint } from './triad-router';
import type { TriadSpec } from './triad-router';

/**
 * One upstream reference router and the deployment it is compared in: the engine-sims (as that engine's
 * connector is configured), how the reference is started in front of them, and the ModelServer that tells Triad
 * the same deployment.
 */
export interface Reference {
  /** Command-line name (`--ref <name>=<path>`). */
  readonly name: string;
  /** The upstream file a local copy of which is passed. */
  readonly upstream: string;
  readonly stages: readonly StageSpec[];
  readonly prefillStage?: string;
  readonly decodeStage: string;
  readonly encodeStages?: readonly string[];
  /** Cases of the set not run here, with the reason (shown in the report). */
  readonly skip?: Readonly<Record<string, string>>;
  /** The script's arguments after `--host 127.0.0.1 --port N`, from the taps' addresses. */
  args(bench: Bench): string[];
  /** False for a script that takes no `--host` (then only `--port N` comes first). */
  readonly hostFlag?: boolean;
  /** Ready once listening; `bench` is there for proxies that are ready only after talking to the engines. */
  ready(bench: Bench): (url: string) => Promise<boolean>;
  readonly triad: TriadSpec;
}

const pdSelector = { matchLabels: { app: 'conformance' }, pdGroup: { groupKey: 'g', prefillLabels: { r: 'p' }, decodeLabels: { r: 'd' } } };
const port = { port: 8000, protocol: 'http' } as const;

function vllmPd(kv: 'nixl' | 'nixl-push' | 'mooncake'): ModelServerRecord['spec'] {
  return {
    model: 'conformance-model',
    inferenceEngine: 'vLLM',
    kvConnector: kv === 'nixl-push' ? { type: 'nixl', transferMode: 'push' } : { type: kv },
    workloadPort: port,
    workloadSelector: pdSelector,
  };
}

/** The vLLM engine-sim answers `n > 1` with a 400 (it generates one sample), so `n` says nothing about vLLM PD here. */
const VLLM_SKIP = { 'n=2, long': 'the vLLM engine-sim refuses n > 1 (it models one sample), so neither router can be compared on it' };

const pdEndpoints = [
  { stage: 'P', role: 'prefill' },
  { stage: 'D', role: 'decode' },
] as const;

const epdSelector = (prefill: boolean) => ({
  matchLabels: { app: 'conformance' },
  pdGroup: { groupKey: 'g', encodeLabels: { r: 'e' }, ...(prefill ? { prefillLabels: { r: 'p' } } : {}), decodeLabels: { r: 'd' } },
});

function vllmEpd(ec: 'nixl' | 'mooncake' | 'shared-storage', prefill: boolean): ModelServerRecord['spec'] {
  return {
    model: 'conformance-model',
    inferenceEngine: 'vLLM',
    pipelineMode: 'epd',
    kvConnector: { type: 'nixl' },
    // What the sims run; batches unbounded as the proxy's default ENCODER_MAX_BATCH_SIZE=0 (the set has at most 3 images).
    ecConnector: { type: ec, enableMmEmbeds: true, maxEncoderBatch: 0, reencodeAttempts: 1 },
    workloadPort: port,
    workloadSelector: epdSelector(prefill),
  };
}

/** The EPD proxies serve only chat completions. */
const EPD_SKIP = {
  'completions, long': 'the EPD proxies serve only /v1/chat/completions',
  'n=2, long': VLLM_SKIP['n=2, long'],
};

/** vLLM's EPD proxy command line (both versions): encoders, prefills (`none` for E→PD), decodes. */
function epdArgs(b: Bench, prefill: boolean): string[] {
  return [
    '--encode-servers-urls',
    [b.stage('E0').tap.url, b.stage('E1').tap.url].join(','),
    '--prefill-servers-urls',
    prefill ? b.stage('P').tap.url : 'none',
    '--decode-servers-urls',
    b.stage('D').tap.url,
  ];
}

const encoders = (ec: 'nixl' | 'mooncake' | 'shared-storage'): StageSpec[] => [
  { stage: 'E0', engine: 'vllm', role: 'encode', ecConnector: ec, sharedEc: ec === 'shared-storage' },
  { stage: 'E1', engine: 'vllm', role: 'encode', ecConnector: ec, sharedEc: ec === 'shared-storage' },
];

/** E→P→D with the shared-storage EC connector (encoders and prefill share a directory) and NIXL KV. */
const epdSharedStages: StageSpec[] = [
  ...encoders('shared-storage'),
  {
    stage: 'P',
    engine: 'vllm',
    role: 'prefill',
    ecConnector: 'shared-storage',
    sharedEc: true,
    enableMmEmbeds: true,
    probeRole: 'prefill',
  },
  { stage: 'D', engine: 'vllm', role: 'decode', enableMmEmbeds: true, probeRole: 'decode' },
];

/** E→P→D with the NIXL EC connector (the consumer pulls from the encoder) and NIXL KV. */
const epdNixlStages: StageSpec[] = [
  ...encoders('nixl'),
  { stage: 'P', engine: 'vllm', role: 'prefill', ecConnector: 'nixl', enableMmEmbeds: true, probeRole: 'prefill' },
  { stage: 'D', engine: 'vllm', role: 'decode', enableMmEmbeds: true, probeRole: 'decode' },
];

const epdNixlEndpoints = [
  { stage: 'E0', role: 'encode' },
  { stage: 'E1', role: 'encode' },
  { stage: 'P', role: 'prefill' },
  { stage: 'D', role: 'decode' },
] as const;

/** Mooncake EC consumers wait this long for a push (vLLM: 60 s), so a missing push fails in seconds. */
const PUSH_WAIT_MS = 5_000;
const EC_DP = 2;

/** The push prefill's `engine_id`, given to vLLM's push proxy demo up front as its operator would. */
const PUSH_PREFILL_ENGINE_ID = 'prefill-engine-001';

/** SGLang waits 300 s for a room upstream; here 3 s, so an `n > 1` request that never pairs fails quickly. */
const SGLANG_BOOTSTRAP_TIMEOUT_MS = 3_000;

export const REFERENCES: readonly Reference[] = [
  {
    name: 'nixl-toy',
    upstream: 'vllm: tests/v1/kv_connector/nixl_integration/toy_proxy_server.py',
    stages: [
      { stage: 'P', engine: 'vllm', role: 'prefill', probeRole: 'prefill' },
      { stage: 'D', engine: 'vllm', role: 'decode', probeRole: 'decode' },
    ],
    prefillStage: 'P',
    decodeStage: 'D',
    skip: VLLM_SKIP,
    args: (b) => [
      '--prefiller-hosts',
      b.stage('P').tap.opts.host,
      '--prefiller-ports',
      String(b.stage('P').sim.port),
      '--decoder-hosts',
      b.stage('D').tap.opts.host,
      '--decoder-ports',
      String(b.stage('D').sim.port),
    ],
    ready: () => answers('/healthcheck', (s) => s === 200),
    triad: { mode: 'pd', spec: vllmPd('nixl'), endpoints: pdEndpoints },
  },
  {
    name: 'mooncake',
    upstream: 'vllm: examples/disaggregated/mooncake_connector/mooncake_connector_proxy.py',
    stages: [
      // Both run upstream vLLM's MooncakeConnector (bootstrap server, router-made transfer ids).
      { stage: 'P', engine: 'vllm', role: 'prefill', kvConnector: 'mooncake', bootstrapPort: 0, probeRole: 'prefill' },
      { stage: 'D', engine: 'vllm', role: 'decode', kvConnector: 'mooncake', probeRole: 'decode' },
    ],
    prefillStage: 'P',
    decodeStage: 'D',
    skip: VLLM_SKIP,
    args: (b) => ['--prefill', b.stage('P').tap.url, String(b.stage('P').sim.bootstrapPort), '--decode', b.stage('D').tap.url],
    // Ready once it has read the prefill's engine ids (GET <bootstrap>/query); before that it answers 503.
    ready: (b) => () =>
      Promise.resolve(b.peek().some((x) => x.stage === 'P' && x.port === 'bootstrap' && x.path === '/query' && x.status === 200)),
    triad: { mode: 'pd', spec: vllmPd('mooncake'), endpoints: pdEndpoints },
  },
  {
    name: 'nixl-push',
    upstream: 'vllm: examples/disaggregated/disaggregated_serving/disagg_proxy_pushconnector_demo.py',
    stages: [
      // Both run vLLM's NixlPushConnector: the decode registers its blocks with the prefill, which writes the KV.
      { stage: 'P', engine: 'vllm', role: 'prefill', kvConnector: 'nixl-push', engineId: PUSH_PREFILL_ENGINE_ID, probeRole: 'prefill' },
      { stage: 'D', engine: 'vllm', role: 'decode', kvConnector: 'nixl-push', probeRole: 'decode' },
    ],
    prefillStage: 'P',
    decodeStage: 'D',
    skip: VLLM_SKIP,
    hostFlag: false,
    // The prefill's NIXL side channel is the engine itself (its advertised address), not its tap: engine-to-engine.
    args: (b) => [
      '--model',
      MODEL,
      '--prefill',
      `${b.stage('P').tap.opts.host}:${b.stage('P').sim.port}`,
      '--decode',
      `${b.stage('D').tap.opts.host}:${b.stage('D').sim.port}`,
      '--prefill-engine-id',
      PUSH_PREFILL_ENGINE_ID,
      '--prefill-kv-host',
      b.stage('P').sim.host,
      '--prefill-side-channel-port',
      String(b.stage('P').sim.port),
    ],
    ready: () => answers('/status', (s) => s === 200),
    triad: { mode: 'pd', spec: vllmPd('nixl-push'), endpoints: pdEndpoints },
  },
  {
    name: 'mini_lb',
    upstream: 'sglang: python/sglang/srt/disaggregation/mini_lb.py',
    stages: [
      { stage: 'P', engine: 'sglang', role: 'prefill', bootstrapTimeoutMs: SGLANG_BOOTSTRAP_TIMEOUT_MS, probeRole: 'prefill' },
      { stage: 'D', engine: 'sglang', role: 'decode', bootstrapTimeoutMs: SGLANG_BOOTSTRAP_TIMEOUT_MS, probeRole: 'decode' },
    ],
    prefillStage: 'P',
    decodeStage: 'D',
    args: (b) => [
      '--prefill',
      b.stage('P').tap.url,
      '--decode',
      b.stage('D').tap.url,
      '--prefill-bootstrap-ports',
      String(b.stage('P').sim.bootstrapPort),
    ],
    ready: () => answers('/health', (s) => s === 200),
    triad: {
      mode: 'pd',
      spec: { model: 'conformance-model', inferenceEngine: 'SGLang', workloadPort: port, workloadSelector: pdSelector },
      endpoints: pdEndpoints,
    },
  },
  {
    name: 'epd-newest',
    upstream: 'vllm: examples/disaggregated/disaggregated_encoder/disagg_epd_proxy.py (newest)',
    stages: epdNixlStages,
    encodeStages: ['E0', 'E1'],
    prefillStage: 'P',
    decodeStage: 'D',
    skip: EPD_SKIP,
    args: (b) => epdArgs(b, true),
    ready: () => answers('/health', (s) => s === 200),
    triad: { mode: 'epd', spec: vllmEpd('nixl', true), endpoints: epdNixlEndpoints },
  },
  {
    name: 'epd-newest-shared-storage',
    upstream: 'vllm: examples/disaggregated/disaggregated_encoder/disagg_epd_proxy.py (newest), shared-storage EC, E→P→D',
    stages: epdSharedStages,
    encodeStages: ['E0', 'E1'],
    prefillStage: 'P',
    decodeStage: 'D',
    skip: EPD_SKIP,
    args: (b) => epdArgs(b, true),
    ready: () => answers('/health', (s) => s === 200),
    triad: { mode: 'epd', spec: vllmEpd('shared-storage', true), endpoints: epdNixlEndpoints },
  },
  {
    name: 'epd-newest-mooncake',
    upstream: 'vllm: examples/disaggregated/disaggregated_encoder/disagg_epd_proxy.py (newest), Mooncake EC, E→PD',
    stages: [
      ...encoders('mooncake'),
      {
        stage: 'D',
        engine: 'vllm',
        role: 'both',
        ecConnector: 'mooncake',
        enableMmEmbeds: true,
        dataParallel: EC_DP,
        ecPushWaitTimeoutMs: PUSH_WAIT_MS,
      },
    ],
    encodeStages: ['E0', 'E1'],
    decodeStage: 'D',
    skip: EPD_SKIP,
    args: (b) => [
      ...epdArgs(b, false),
      '--ec-consumer-zmq-addrs',
      (b.stage('D').sim.ecControlAddresses ?? []).join(','),
      '--ec-consumer-dp-size',
      String(EC_DP),
    ],
    ready: () => answers('/health', (s) => s === 200),
    triad: {
      mode: 'epd',
      spec: vllmEpd('mooncake', false),
      endpoints: (b: Bench): TriadEndpoint[] => [
        { stage: 'E0', role: 'encode' },
        { stage: 'E1', role: 'encode' },
        { stage: 'D', role: 'decode', dpSize: EC_DP, ecControlAddresses: b.stage('D').sim.ecControlAddresses ?? [] },
      ],
    },
  },
  {
    name: 'epd-classic',
    upstream: 'vllm: examples/online_serving/disaggregated_encoder/disagg_epd_proxy.py at 7e4cd77021afa2d7298f9e6836dc789517b01925',
    stages: epdNixlStages,
    encodeStages: ['E0', 'E1'],
    prefillStage: 'P',
    decodeStage: 'D',
    skip: EPD_SKIP,
    args: (b) => epdArgs(b, true),
    ready: () => answers('/health', (s) => s === 200),
    triad: { mode: 'epd', spec: vllmEpd('nixl', true), endpoints: epdNixlEndpoints },
  },
];
