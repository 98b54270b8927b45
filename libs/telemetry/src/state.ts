import type { Attributes, Link, Span, SpanContext, SpanKind } from '@opentelemetry/api';

/** What the span helpers start spans with: the SDK's tracer behind a thin adapter, or Triad's span recorder. */
export interface SpanStarter {
  /**
   * Starts a span under `parent` (a valid span context, or undefined for a new trace), at `startMs` (epoch ms) or
   * now. `attributes` is called only when the span records and must hold no `undefined` values.
   */
  begin(
    name: string,
    kind: SpanKind,
    parent: SpanContext | undefined,
    startMs: number | undefined,
    attributes?: () => Attributes,
    links?: Link[],
  ): Span;
}

/**
 * The process-wide tracing state the span helpers read. One mutable object so `setupTelemetry` and `shutdown`
 * switch every helper at once; when `tracer` is undefined every helper returns a shared no-op without calling
 * into OpenTelemetry at all (the disabled hot path is one property read).
 */
interface TracingState {
  tracer: SpanStarter | undefined;
}

export const tracing: TracingState = { tracer: undefined };

/** True while a tracer provider set up by `setupTelemetry` is active. */
export function tracingEnabled(): boolean {
  return tracing.tracer !== undefined;
}
