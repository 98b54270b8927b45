// The request contract: one RequestContext from arrival to the last byte, the lifecycle hooks, the request
// errors and their one mapping to OpenAI HTTP errors, and the request-body facts every stage shares.
export { RequestContext, isRouted } from './context/request-context';
export { TRACE_ID_HEADER } from './client-sink';
export type { RoutedRequest, ProxyRequest, EngineRequest, ProviderRequest, IncomingHeaders } from './context/request-context';
export type {
  DpRankPicker,
  RoutingPart,
  EngineRouting,
  ProviderRouting,
  Usage,
  KvStrandReason,
  KvStrandAction,
  KvStrandedEvent,
} from './context/parts';
export { RequestLocal } from './context/request-local';
export { composeHooks } from './hooks';
export type { RequestHooks, StageSpan } from './hooks';
export { DEFAULT_STAGE_TIMEOUTS } from './server-profile';
export type {
  ConnectorName,
  EngineConnectorName,
  ProviderConnectorName,
  ServerProfile,
  ProviderProfile,
  StageTimeouts,
  RetryPolicy,
  EcProfile,
  KvProfile,
} from './server-profile';
export {
  RequestError,
  BadRequestError,
  BodyTooLargeError,
  NotFoundError,
  PathNotFoundError,
  UnauthorizedError,
  ForbiddenError,
  RateLimitedError,
  QueueTimeoutError,
  AdmissionUnavailableError,
  ClientAbortedError,
  UpstreamError,
  PathNotServedError,
  EcHandoffError,
  TotalTimeoutError,
  SchedulingError,
  isRetryable,
  failedStageOf,
  errorCodeOf,
  asError,
  HttpLayerError,
  echo,
} from './errors/request-errors';
export type { LegFailure, EcHandoffFailureReason } from './errors/request-errors';
export { toOpenAiError, clientMessageOf, httpStatusOf, writeErrorResponse, writeStreamError } from './errors/openai-errors';
export { extractMediaParts } from './body/media';
export { DEFAULT_REQUEST_LIMITS, checkBodyLimits, checkRawLimits } from './body/request-limits';
export type { RequestLimits } from './body/request-limits';
export type { MediaPart, Modality } from './body/media';
export { promptText } from './body/prompt-text';
export {
  GENERATE_PATH,
  generateBeamWidth,
  generatePromptCount,
  generateSampleCount,
  generateSequenceCount,
  sampleCount,
} from './body/generate-counts';
export { completionPromptCount } from './body/completion-prompts';
