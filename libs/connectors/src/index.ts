// Stage loop and connectors: how one OpenAI request becomes engine requests (aggregated, vLLM PD/EPD, SGLang PD/EPD).
export type {
  Connector,
  LegInfo,
  LegOutcome,
  StageObserver,
  LegHandle,
  LegRunner,
  LegSpec,
  BufferedAnswer,
  KvStrandReport,
  RemoteOrigin,
  AnswerCodec,
  RelayedAnswer,
  StreamRelay,
} from './types';
export { serializeWith, topLevelValue, randomBootstrapRoom } from './json-text';
export { clientWantsUsage, finalLegBody, vllmPrefillBody, vllmReleaseBody, encoderBody, sglangBody } from './request-bodies';
export type { SglangBootstrap } from './request-bodies';
export { parseBodyUsage, SseUsageRelay } from './usage';
export { UpstreamPools, DEFAULT_UPSTREAM_CONNECTIONS } from './upstream-pools';
export { IDLE_CLOSE_RACE_MS } from './socket-reuse';
export type { UpstreamPoolOptions, UpstreamRequest, EndpointSlot } from './upstream-pools';
export { engineErrorMessage, clientAbortedError, upstreamHttpError } from './errors';
export { runProxy } from './stage-loop';
export type { StageLoopOptions } from './stage-loop';
export { ConnectorRegistry, connectorFor, relaysKvParams } from './registry';
export type { ConnectorFactory } from './registry';
export { retryPolicyOf, stageTimeoutsOf, serverProfileOf, ecProfileOf, kvProfileOf } from './server-profile';
