import {
  ROOT_CONTEXT,
  trace,
  type Attributes,
  type Link,
  type Span,
  type SpanContext,
  type SpanKind,
  type Tracer,
} from '@opentelemetry/api';
import type { SpanStarter } from './state';

/**
 * The span helpers' entry onto the SDK's tracer: the parent span context becomes an explicit parent context (no
 * context manager is involved), and attributes are built only when the sampler kept the span.
 */
export class SdkSpanStarter implements SpanStarter {
  constructor(private readonly tracer: Tracer) {}

  begin(
    name: string,
    kind: SpanKind,
    parent: SpanContext | undefined,
    startMs: number | undefined,
    attributes?: () => Attributes,
    links?: Link[],
  ): Span {
    const context = parent === undefined ? ROOT_CONTEXT : trace.setSpanContext(ROOT_CONTEXT, parent);
    const span = this.tracer.startSpan(name, { kind, startTime: startMs, links, root: parent === undefined }, context);
    if (attributes !== undefined && span.isRecording()) span.setAttributes(attributes());
    return span;
  }
}
