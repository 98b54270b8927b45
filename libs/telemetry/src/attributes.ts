import type { Attributes, AttributeValue } from '@opentelemetry/api';

/**
 * Every attribute name Triad writes, in one place. Standard names follow the OpenTelemetry semantic conventions
 * (GenAI ones are still "Development" status, so they are spelled out here rather than imported from the
 * incubating entry point); facts the conventions have no name for (stages, PD groups, affinity, scheduling
 * decisions) live under `triad.*`, never under invented `gen_ai.*` names.
 */
export const ATTR = {
  // GenAI
  genAiOperationName: 'gen_ai.operation.name',
  genAiProviderName: 'gen_ai.provider.name',
  genAiRequestModel: 'gen_ai.request.model',
  genAiResponseModel: 'gen_ai.response.model',
  genAiRequestMaxTokens: 'gen_ai.request.max_tokens',
  genAiRequestStream: 'gen_ai.request.stream',
  genAiResponseId: 'gen_ai.response.id',
  genAiResponseFinishReasons: 'gen_ai.response.finish_reasons',
  genAiResponseTimeToFirstChunk: 'gen_ai.response.time_to_first_chunk',
  genAiUsageInputTokens: 'gen_ai.usage.input_tokens',
  genAiUsageOutputTokens: 'gen_ai.usage.output_tokens',
  genAiUsageCacheReadInputTokens: 'gen_ai.usage.cache_read.input_tokens',
  // General / HTTP / messaging
  serverAddress: 'server.address',
  serverPort: 'server.port',
  errorType: 'error.type',
  httpRequestMethod: 'http.request.method',
  httpRoute: 'http.route',
  httpResponseStatusCode: 'http.response.status_code',
  urlPath: 'url.path',
  userAgentOriginal: 'user_agent.original',
  messagingSystem: 'messaging.system',
  messagingDestinationName: 'messaging.destination.name',
  messagingBatchMessageCount: 'messaging.batch.message_count',
  // Triad
  requestId: 'triad.request.id',
  mode: 'triad.mode',
  stage: 'triad.stage',
  role: 'triad.role',
  pdGroup: 'triad.pd_group',
  namespace: 'triad.namespace',
  modelServer: 'triad.model_server',
  modelRoute: 'triad.model_route',
  lora: 'triad.lora',
  endpointKey: 'triad.endpoint.key',
  endpointPod: 'triad.endpoint.pod',
  attempt: 'triad.attempt',
  /** Continuations of a stream that broke mid-answer (`trafficPolicy.streamResume`). */
  streamResumes: 'triad.stream.resumes',
  /** Why a stream that broke mid-answer was not resumed. */
  streamResumeRefused: 'triad.stream.resume_refused',
  itemIndex: 'triad.encoder.item_index',
  itemModality: 'triad.encoder.modality',
  itemBytes: 'triad.encoder.item_bytes',
  cacheAffinityHit: 'triad.cache_affinity_hit',
  mediaItems: 'triad.media_items',
  scheduleLocal: 'triad.schedule.local',
  scheduleBatchSize: 'triad.schedule.batch_size',
  decisionEndpoint: 'triad.decision.endpoint',
  decisionPrefill: 'triad.decision.prefill',
  decisionEncoders: 'triad.decision.encoders',
  decisionEncoderAffinityHits: 'triad.decision.encoder_affinity_hits',
  decisionTopN: 'triad.decision.top_n',
  decisionAlternates: 'triad.decision.alternates',
  decisionDecidedBy: 'triad.decision.decided_by',
  /** Stages this request skips by per-request disaggregation (`prefill`, `encode`). */
  decisionSkippedStages: 'triad.decision.skipped_stages',
  /** Why the request runs or skips its optional stages (the scheduler's words). */
  decisionDisaggregation: 'triad.decision.disaggregation',
  decisionErrorCode: 'triad.decision.error_code',
  schedulerPhase: 'triad.scheduler.phase',
  schedulerProfile: 'triad.scheduler.profile',
  schedulerPlugin: 'triad.scheduler.plugin',
  schedulerCandidates: 'triad.scheduler.candidates',
  schedulerRemaining: 'triad.scheduler.remaining',
  retryReason: 'triad.retry.reason',
  /** Stages the request skipped for want of a usable endpoint, each `stage:reason` (e.g. `prefill:all_failed`). */
  stageFallback: 'triad.stage_fallback',
  failedStage: 'triad.failed_stage',
  reconcileSource: 'triad.reconcile.source',
  reconcileTrigger: 'triad.reconcile.trigger',
  reconcileWritten: 'triad.reconcile.endpoints_written',
  reconcileDeleted: 'triad.reconcile.endpoints_deleted',
  reconcileEndpoints: 'triad.reconcile.endpoints',
  reconcileInvalid: 'triad.reconcile.invalid_specs',
  encoderRegistryChange: 'triad.encoder_registry.change',
  encoderRegistryEncoders: 'triad.encoder_registry.encoders',
  encoderRegistryPrefill: 'triad.encoder_registry.prefill',
  encoderRegistryRegistered: 'triad.encoder_registry.registered',
  encoderRegistryUnregistered: 'triad.encoder_registry.unregistered',
} as const;

/** Adds `key` only when `value` is defined: the SDK warns about (and drops) undefined attribute values. */
export function put(attrs: Attributes, key: string, value: AttributeValue | undefined | null): Attributes {
  if (value !== undefined && value !== null) attrs[key] = value;
  return attrs;
}

const providerNames = new Map<string, string>();

/**
 * `gen_ai.provider.name` for a self-hosted engine: the spec has no registered value, so `vllm` / `sglang`. Kept per
 * engine name (a handful): every leg span asks, and `toLowerCase` makes a new string each time.
 */
function providerName(engine: string): string {
  let name = providerNames.get(engine);
  if (name === undefined) {
    name = engine.toLowerCase();
    if (providerNames.size < 64) providerNames.set(engine, name);
  }
  return name;
}

/** What the gateway knows about one engine call when it starts. */
export interface InferenceRequestInfo {
  /** `chat` for /v1/chat/completions, `text_completion` for /v1/completions, ... */
  readonly operation: string;
  /** `vLLM` / `SGLang` (any case) or already `vllm` / `sglang`. */
  readonly engine: string;
  /** Model name sent to the engine. */
  readonly model: string;
  readonly maxTokens?: number;
  readonly stream?: boolean;
}

/** GenAI request attributes of an inference leg (set at span start). */
export function genAiRequestAttributes(info: InferenceRequestInfo, attrs: Attributes = {}): Attributes {
  attrs[ATTR.genAiOperationName] = info.operation;
  attrs[ATTR.genAiProviderName] = providerName(info.engine);
  attrs[ATTR.genAiRequestModel] = info.model;
  put(attrs, ATTR.genAiRequestMaxTokens, info.maxTokens);
  if (info.stream) attrs[ATTR.genAiRequestStream] = true;
  return attrs;
}

/** What an engine's reply told the gateway. */
export interface InferenceResponseInfo {
  readonly responseModel?: string;
  readonly responseId?: string;
  readonly inputTokens?: number;
  readonly outputTokens?: number;
  readonly cachedInputTokens?: number;
  readonly finishReasons?: readonly string[];
  readonly statusCode?: number;
}

/** GenAI response attributes (model, usage, finish reasons) and the engine's HTTP status. */
export function genAiResponseAttributes(info: InferenceResponseInfo, attrs: Attributes = {}): Attributes {
  put(attrs, ATTR.genAiResponseModel, info.responseModel);
  put(attrs, ATTR.genAiResponseId, info.responseId);
  put(attrs, ATTR.genAiUsageInputTokens, info.inputTokens);
  put(attrs, ATTR.genAiUsageOutputTokens, info.outputTokens);
  put(attrs, ATTR.genAiUsageCacheReadInputTokens, info.cachedInputTokens);
  if (info.finishReasons && info.finishReasons.length > 0) attrs[ATTR.genAiResponseFinishReasons] = [...info.finishReasons];
  put(attrs, ATTR.httpResponseStatusCode, info.statusCode);
  return attrs;
}

/** Where a leg goes: the endpoint as the scheduler named it. */
export interface EndpointInfo {
  readonly ip: string;
  readonly port: number;
  readonly pod?: string;
  readonly key?: string;
}

/** `server.address` / `server.port` (the real backend pod) plus Triad's endpoint key and pod name. */
export function endpointAttributes(endpoint: EndpointInfo, attrs: Attributes = {}): Attributes {
  attrs[ATTR.serverAddress] = endpoint.ip;
  attrs[ATTR.serverPort] = endpoint.port;
  put(attrs, ATTR.endpointPod, endpoint.pod);
  put(attrs, ATTR.endpointKey, endpoint.key);
  return attrs;
}
