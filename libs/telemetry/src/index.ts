// Setup (call once per process) and configuration.
export { setupTelemetry } from './setup';
export type { Telemetry, TelemetryOptions } from './setup';
export { readTelemetryConfig, parseKeyValueList } from './config';
export type { TelemetryConfig, ServiceName, SamplerName, BatchConfig, SpanLimitsConfig } from './config';
export type { TelemetryLogger } from './diag-logger';
export { tracingEnabled } from './state';

// Generic spans.
export {
  NOOP_TRACED,
  startTraced,
  setAttributes,
  addEvent,
  recordFailure,
  endTraced,
  inSpan,
  errorTypeOf,
  traceIdOf,
  contextOf,
} from './spans';
export type { Traced, Parent, StartOptions } from './spans';

// W3C propagation over HTTP and NATS headers.
export {
  injectTraceHeaders,
  extractTraceContext,
  injectBatchTraceHeaders,
  extractBatchTraceContexts,
  BATCH_TRACE_HEADER,
} from './propagation';
export type { HeaderCarrier } from './propagation';

// Attributes (GenAI conventions + triad.*).
export { ATTR, put, genAiRequestAttributes, genAiResponseAttributes, endpointAttributes } from './attributes';
export type { InferenceRequestInfo, InferenceResponseInfo, EndpointInfo } from './attributes';
export { decisionAttributes } from './decision-attributes';

// Per-app span helpers.
export {
  startRequestSpan,
  finishRequestSpan,
  startRouteSpan,
  finishRouteSpan,
  startScheduleSpan,
  finishScheduleSpan,
  startLegSpan,
  startEncodeSpan,
  startPrefillSpan,
  startDecodeSpan,
  finishLegSpan,
  recordFirstToken,
  recordRetry,
} from './gateway-spans';
export type { RequestSpanInfo, RouteInfo, RequestOutcome, ScheduleSpanInfo, LegInfo, LegOutcome } from './gateway-spans';
export { createGatewayTracingHooks, requestSpanOf, requestTraceId, scheduleSpanOf } from './gateway-hooks';
export { startDecideSpan, finishDecideSpan, startPhaseSpan, finishPhaseSpan } from './scheduler-spans';
export type { DecideSpanInfo, PhaseInfo } from './scheduler-spans';
export { startReconcileSpan, finishReconcileSpan, startEncoderRegistrySpan, finishEncoderRegistrySpan } from './pod-watcher-spans';
export type { ReconcileResult, EncoderRegistryInfo, EncoderRegistryResult } from './pod-watcher-spans';
