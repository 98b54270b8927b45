import type { EcConnectorType, InferenceEngine, MooncakeImplementation, OutlierPolicy, PipelineMode, StreamResumePolicy } from '@triad/crd';

/** Names of the connectors that proxy a request to engines (one per protocol, not per transport × mode). */
export type EngineConnectorName =
  'aggregated' | 'vllm-http' | 'vllm-nixl' | 'vllm-nixl-push' | 'vllm-mooncake' | 'vllm-lmcache' | 'vllm-epd' | 'sglang-pd' | 'sglang-epd';

/** Names of the connectors that proxy a request to an ExternalModelProvider (one per provider API). */
export type ProviderConnectorName = 'external-openai' | 'external-anthropic';

export type ConnectorName = EngineConnectorName | ProviderConnectorName;

/** Per-stage time budgets in ms; 0 disables one. */
export interface StageTimeouts {
  /** One encoder request, headers to last byte. */
  readonly encodeMs: number;
  /** The prefill request, headers to last byte. */
  readonly prefillMs: number;
  /** From sending the final leg (aggregated or decode) to its first body byte. */
  readonly firstByteMs: number;
  /** The whole request, from arrival to the last byte. */
  readonly totalMs: number;
}

/**
 * The gateway-wide stage budgets used when a ModelServer sets no `trafficPolicy.timeout` (and the defaults of
 * the gateway's `--*-timeout-ms` settings): the one place they are written.
 */
export const DEFAULT_STAGE_TIMEOUTS: StageTimeouts = Object.freeze({
  encodeMs: 30_000,
  prefillMs: 60_000,
  firstByteMs: 60_000,
  totalMs: 600_000,
});

/** `trafficPolicy.retry` resolved: how many retries after the first try, and the pause before each. */
export interface RetryPolicy {
  readonly retries: number;
  readonly intervalMs: number;
}

/** vLLM EPD: how encoder output reaches its consumer (ModelServer `ecConnector`, defaults applied). */
export interface EcProfile {
  readonly connector: EcConnectorType;
  /** The encoder pushes to a consumer named before encoding (Mooncake): `consumer_zmq` and transfer ids. */
  readonly push: boolean;
  /** P/PD/D accept `*_embeds` parts: media are rewritten to the encoder's metadata references. */
  readonly mmEmbeds: boolean;
  /** Most images per encoder request; 0 = no bound. */
  readonly maxEncoderBatch: number;
  /** Push connectors: re-encodes after a prefill/decode 500 before the first byte. */
  readonly reencodeAttempts: number;
}

/** vLLM P→D KV transfer settings of a ModelServer (`spec.kvConnector`, defaults applied). */
export interface KvProfile {
  readonly type: 'http' | 'nixl' | 'mooncake' | 'lmcache';
  /** `mooncake`: upstream vLLM's connector (concurrent), vllm-ascend's (sequential), or `auto` (each prefill's probe says). */
  readonly mooncake: MooncakeImplementation;
  /** `nixl`: NixlPushConnector (`push`: prefill and decode concurrently) or the pull connector. */
  readonly push: boolean;
}

/** What the stage loop needs to know about any target, an engine's ModelServer or an ExternalModelProvider. */
interface ProfileCommon {
  readonly namespace: string;
  readonly name: string;
  /** `namespace/name`: the label value and log field of the target. */
  readonly key: string;
  readonly mode: PipelineMode;
  readonly connector: ConnectorName;
  readonly retry: RetryPolicy;
  readonly timeouts: StageTimeouts;
  /** `trafficPolicy.outlierDetection` with defaults (absent: the defaults). */
  readonly outlier?: OutlierPolicy;
  /** `spec.connectionPool.maxConnections`: requests in flight per endpoint (else the gateway's default). */
  readonly maxConnections?: number;
}

/** What proxying needs to know about a ModelServer (resolved once per KV update, not per request). */
export interface ServerProfile extends ProfileCommon {
  readonly kind: 'engine';
  readonly engine: InferenceEngine;
  readonly connector: EngineConnectorName;
  /** vLLM P→D: relay the prefill's `kv_transfer_params` to decode (nixl, mooncake, lmcache; not plain http). */
  readonly relayKvParams: boolean;
  /**
   * vLLM P→D KV connector (`kvConnector.type`, `nixl` for vLLM EPD without one): how the prefill and decode legs are
   * sent (docs/protocols/vllm.md). Absent for SGLang, aggregated and providers.
   */
  readonly kv?: KvProfile;
  /**
   * vLLM P→D whose KV connector's transfer parameters name one engine request's blocks (NIXL, Mooncake), so one
   * client request carries one prompt: vLLM's prefill answers the parameters of a batch's first prompt only.
   */
  readonly singlePromptKvHandoff?: true;
  /** vLLM EPD only: the EC connector settings (absent elsewhere). */
  readonly ec?: EcProfile;
  /**
   * Stages the engines can do without (`shortcutsOf` in @triad/crd): the EC consumer encodes (`localEncode`), the
   * decode prefills (`skipPrefill`). A stage whose every try failed falls back to its shortcut (docs/reliability.md).
   */
  readonly shortcuts?: { readonly localEncode: boolean; readonly skipPrefill: boolean };
  /** `spec.engineAuth.passThrough`: the client's Authorization goes to the engines (never by default). */
  readonly authPassThrough?: boolean;
  /** `spec.engineAuth.credential`: the engine credential (by name, in the server's namespace) the engines get as Authorization. */
  readonly engineCredential?: string;
  /**
   * `spec.engineAuth.secretRef`: the engines get the Secret's value as Authorization, which the pod-watcher seals for
   * the gateways (`triad_v1_engine_credentials`, keyed by this server).
   */
  readonly engineSecretRef?: { readonly name: string; readonly key: string };
  /** `trafficPolicy.streamResume`: broken streams are continued on another pod (absent: they fail as before). */
  readonly streamResume?: StreamResumePolicy;
}

/**
 * An ExternalModelProvider target: one hop to the provider's API (so `aggregated`), retried and timed by the
 * gateway's provider settings.
 */
export interface ProviderProfile extends ProfileCommon {
  readonly kind: 'provider';
  /** The provider's API (`spec.providerType`). */
  readonly api: 'OpenAI' | 'Anthropic';
  readonly mode: 'aggregated';
  readonly connector: ProviderConnectorName;
}

/** What a request is proxied to: a ModelServer's engines or an ExternalModelProvider. */
export type TargetProfile = ServerProfile | ProviderProfile;
