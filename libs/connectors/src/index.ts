// Stage loop and connectors: how one OpenAI request becomes engine requests (aggregated, vLLM PD/EPD, SGLang PD/EPD).
export type {
  ConnectorName, Connector, ClientSink, StageTimeouts, RetryPolicy, ServerProfile, Usage, LegInfo, LegOutcome, StageObserver,
  ProxyResult, ProxyCall, LegHandle, LegRunner, LegSpec, BufferedAnswer,
} from './types';
export { extractMediaParts, inlineMediaBytes } from './media';
export type { MediaPart, Modality } from './media';
export { serializeWith, topLevelValue, randomBootstrapRoom } from './json-text';
export { clientWantsUsage, finalLegBody, vllmPrefillBody, encoderBody, sglangBody } from './request-bodies';
export type { SglangBootstrap } from './request-bodies';
export { parseBodyUsage, SseUsageRelay } from './usage';
export { UpstreamPools, defaultUpstreamPoolOptions, originOf } from './upstream-pools';
export type { UpstreamPoolOptions } from './upstream-pools';
export { toOpenAiError, writeErrorResponse, writeStreamError } from './openai-errors';
export type { OpenAiError } from './openai-errors';
export { isRetryable, engineErrorMessage, clientAbortedError } from './errors';
export { StageLoop, runProxy, emptyResult } from './stage-loop';
export { ConnectorRegistry, CONNECTOR_NAMES, connectorFor, relaysKvParams } from './registry';
export type { ConnectorFactory } from './registry';
export { defaultStageTimeouts, retryPolicyOf, stageTimeoutsOf, serverProfileOf } from './server-profile';
