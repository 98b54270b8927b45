import type { Attempt, Decision, DecisionOrError, EndpointRef, Stage, StageFallback } from '@triad/bus';
import type { MediaPart } from '../body/media';
import type {
  ConnectorName,
  EngineConnectorName,
  ProviderConnectorName,
  ProviderProfile,
  ServerProfile,
  TargetProfile,
} from '../server-profile';

/** Token counts from the engine's usage (the decode's, for disaggregated requests). */
export interface Usage {
  readonly promptTokens: number;
  readonly completionTokens: number;
}

/**
 * Routing's record (`ctx.routing`), written once by route resolution: the route that matched, the target its
 * rule picked (a ModelServer the gateway knows, or an ExternalModelProvider) and the model the target gets.
 */
export interface RoutingPart {
  /** ModelRoute (or HTTPRoute) `namespace/name`. */
  readonly route: string;
  /** Namespace of the route and of its targets. */
  readonly namespace: string;
  /** Name of the ModelServer or ExternalModelProvider the rule picked. */
  readonly serverName: string;
  /** The request named a LoRA adapter of the route: its `model` is not rewritten. */
  readonly lora: boolean;
  /** The picked target. */
  readonly server: TargetProfile;
  /** The model the target gets (ModelServer or provider `spec.model`, or the request model for a LoRA adapter). */
  readonly upstreamModel: string;
  /** The path the engine gets when an HTTPRoute's URLRewrite changed it (Gateway API mode); else the request's. */
  readonly upstreamPath?: string | undefined;
}

/** Routing to a ModelServer's engines. */
export interface EngineRouting extends RoutingPart {
  readonly server: ServerProfile;
}

/** Routing to an ExternalModelProvider. */
export interface ProviderRouting extends RoutingPart {
  readonly server: ProviderProfile;
}

/** Scheduling's record (`ctx.schedule`), written once when the decision (or its failure) arrived. */
export interface SchedulePart {
  readonly decision: DecisionOrError;
  /** Decided by the gateway's own scheduling (fallback or `--scheduling in-process`), not the scheduler service. */
  readonly local: boolean;
  /** Time from asking to the answer. */
  readonly durationMs: number;
}

/**
 * What the stage loop runs (`ctx.proxy`), written once after routing (and, for engines, scheduling): which
 * connector, the tries in order, and how usage is asked for.
 */
export interface ProxyPart {
  readonly connector: ConnectorName;
  /** The tries of the final leg in order (an engine decision's attempts; a provider's endpoint once per try). */
  readonly attempts: readonly Attempt[];
  /**
   * Add `stream_options.include_usage` for accounting (streamed chat/completions only; other paths such as
   * `/v1/responses` have no such option and are relayed as they are).
   */
  readonly injectUsage: boolean;
  /** The client asked for the usage chunk itself (else an injected one is removed again). */
  readonly clientWantsUsage: boolean;
}

/** What an engine connector runs: the scheduler's decision and the request's media, on top of {@link ProxyPart}. */
export interface EngineProxyPart extends ProxyPart {
  readonly connector: EngineConnectorName;
  readonly decision: Decision;
  /** Media parts of the request in order (only extracted for epd servers), else empty. */
  readonly media: readonly MediaPart[];
  /**
   * Picks the data-parallel rank of an engine for one leg (SGLang engines that report `dp_size` > 1); undefined
   * when there is none to pick. Absent: no rank hints.
   */
  readonly dpRank: DpRankPicker | undefined;
}

/** What a provider connector runs. */
export interface ProviderProxyPart extends ProxyPart {
  readonly connector: ProviderConnectorName;
}

/** Chooses a DP rank of `endpoint` for one leg of `role`, or undefined when the engine has no ranks to choose. */
export type DpRankPicker = (endpoint: EndpointRef, role: 'prefill' | 'decode' | 'aggregated') => number | undefined;

/**
 * How the request ended (`ctx.result`): written by the stage loop (and by the gateway for a request that
 * failed before it), read by metrics, the access log and the `onEnd` hooks.
 */
export class RequestResult {
  /** HTTP status the client got (499 when it went away), 0 until known. */
  status = 0;
  error: Error | undefined = undefined;
  /** Index of the attempt that answered (or the last one tried). */
  attempt = 0;
  /** Tries of the final leg (1 + retries). */
  tries = 0;
  usage: Usage | undefined = undefined;
  /** When the first byte was written to the client (`performance.now()`), 0 if never. */
  firstByteAt = 0;
  /** Wall-clock ms spent per stage (sum over legs of that stage; encode legs run concurrently: their span). */
  encodeMs = 0;
  prefillMs = 0;
  decodeMs = 0;
  /** Pod names per stage, in the order legs were sent (retries included). */
  readonly endpoints: Partial<Record<Stage, string[]>> = {};
  /** Outlier transitions this request's legs caused (ejection, failed probe, restore), for the access log. */
  readonly outliers: OutlierEvent[] = [];
  /** KV hand-offs of this request that a decode did not take, and what the gateway did about each. */
  readonly kvStranded: KvStrandedEvent[] = [];
  /**
   * Stages this request skipped because they had no usable endpoint, served by the engine's shortcut instead (the
   * decision's, then the gateway's own when every try of the stage failed): `x-triad-stage-fallback`, the access
   * log, `triad_gateway_stage_fallback_total`, the span's `triad.stage_fallback`.
   */
  readonly stageFallbacks: StageFallback[] = [];
  /** Continuations of a stream that broke mid-answer (`trafficPolicy.streamResume`). */
  resumes = 0;
  /** Why a stream that broke mid-answer was not resumed (e.g. `n`-style `not_eligible`, `max_tokens`, `tool_calls`). */
  resumeRefused: string | undefined = undefined;
}

/** Why a prefill's KV was left without the decode that should take it. */
export type KvStrandReason = 'client_aborted' | 'total_timeout' | 'decode_failed' | 'prefill_failed';

/**
 * What the gateway did about it: `release` sent a release leg (vLLM: a one-token decode carrying the prefill's
 * `kv_transfer_params`, which makes a decode read and so free the blocks), `abort_peer` aborted the other leg of
 * the pair (SGLang: an aborted request releases its room on that engine), `none` nothing it could do.
 */
export type KvStrandAction = 'release' | 'abort_peer' | 'none';

/** One KV hand-off a decode did not take (access log `kv_stranded`). */
export interface KvStrandedEvent {
  readonly engine: 'vLLM' | 'SGLang';
  /** Pods of the prefill holding the KV and of the decode that did not take it. */
  readonly prefill: string;
  readonly decode: string;
  readonly reason: KvStrandReason;
  readonly action: KvStrandAction;
  /** `release`: the decode pod the release leg went to. */
  readonly via?: string;
}

/** An outlier transition one leg caused. */
export interface OutlierEvent {
  readonly endpoint: string;
  readonly stage: Stage;
  readonly action: 'ejected' | 'probe-failed' | 'restored';
  /** What failed (`5xx`, `connect`, `timeout`, `reset`), for ejections. */
  readonly reason?: string;
}
