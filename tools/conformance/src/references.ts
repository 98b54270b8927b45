import type { ModelServerRecord } from '@triad/bus';
import type { Bench, StageSpec } from './bench';
import { answers } from './router';
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
  readonly encodeStage?: string;
  /** Cases of the set not run here, with the reason (shown in the report). */
  readonly skip?: Readonly<Record<string, string>>;
  /** The script's arguments after `--host 127.0.0.1 --port N`, from the taps' addresses. */
  args(bench: Bench): string[];
  /** Ready once listening; `bench` is there for proxies that are ready only after talking to the engines. */
  ready(bench: Bench): (url: string) => Promise<boolean>;
  readonly triad: TriadSpec;
}

const pdSelector = { matchLabels: { app: 'conformance' }, pdGroup: { groupKey: 'g', prefillLabels: { r: 'p' }, decodeLabels: { r: 'd' } } };
const port = { port: 8000, protocol: 'http' } as const;

function vllmPd(kv: 'nixl' | 'mooncake'): ModelServerRecord['spec'] {
  return {
    model: 'conformance-model',
    inferenceEngine: 'vLLM',
    kvConnector: { type: kv },
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
      { stage: 'P', engine: 'vllm', role: 'prefill', bootstrapPort: 0, probeRole: 'prefill' },
      { stage: 'D', engine: 'vllm', role: 'decode', probeRole: 'decode' },
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
];
