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
  RemoteOrigin,
  AnswerCodec,
  RelayedAnswer,
  StreamRelay,
} from './types';
export { originOf } from './addresses';
export { clientWantsUsage } from './request-bodies';
export { SseEventSplitter, sseEvents, type SseEvent } from './sse';
export { UpstreamPools, DEFAULT_UPSTREAM_CONNECTIONS } from './upstream-pools';
export type { UpstreamPoolOptions, UpstreamRequest, EndpointSlot } from './upstream-pools';
export { IDLE_CLOSE_RACE_MS } from './socket-reuse';
export { afterLegWrites, legWriteDone, legWritePending } from './leg-writes';
export { engineErrorMessage, clientAbortedError } from './errors';
export { runProxy } from './stage-loop';
export { ConnectorRegistry } from './registry';
export { serverProfileOf } from './server-profile';
