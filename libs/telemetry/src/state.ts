import type { TriadTracer } from './tracer';

/**
 * The process-wide tracing state the span helpers read. One mutable object so `setupTelemetry` and `shutdown`
 * switch every helper at once; when `tracer` is undefined every helper returns a shared no-op without calling
 * into OpenTelemetry at all (the disabled hot path is one property read).
 */
interface TracingState {
  tracer: TriadTracer | undefined;
  captureMessageContent: boolean;
}

export const tracing: TracingState = { tracer: undefined, captureMessageContent: false };

/** True while a tracer provider set up by `setupTelemetry` is active. */
export function tracingEnabled(): boolean {
  return tracing.tracer !== undefined;
}

/** True when prompt and completion text may be recorded (explicit opt-in). */
export function messageContentCaptureEnabled(): boolean {
  return tracing.tracer !== undefined && tracing.captureMessageContent;
}
