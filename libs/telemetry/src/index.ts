// Setup (call once per process) and configuration.
export { setupTelemetry } from './setup';
export type { Telemetry } from './setup';

// Generic spans.
export { startTraced } from './spans';
export { tracingEnabled } from './state';
export type { Traced } from './spans';

// W3C propagation over HTTP and NATS headers.
export { injectBatchTraceHeaders, extractBatchTraceContexts, BATCH_TRACE_HEADER } from './propagation';

// Attributes (GenAI conventions + triad.*).
export { ATTR, put } from './attributes';

// Per-app span helpers.
export { createGatewayTracingHooks, requestSpanOf, requestTraceId, scheduleSpanOf } from './gateway-hooks';
export { startDecideSpan, finishDecideSpan, startPhaseSpan, finishPhaseSpan } from './scheduler-spans';
export { startReconcileSpan, finishReconcileSpan, startEncoderRegistrySpan, finishEncoderRegistrySpan } from './pod-watcher-spans';
