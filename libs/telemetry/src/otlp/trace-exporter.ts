import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace-base';
import { OTLPExporterBase } from '@opentelemetry/otlp-exporter-base';
import { convertLegacyHttpOptions, createOtlpHttpExportDelegate } from '@opentelemetry/otlp-exporter-base/node-http';
import {
  ProtobufTraceSerializer,
  TraceExporterMetricsHelper,
  type IExportTraceServiceResponse,
  type ISerializer,
} from '@opentelemetry/otlp-transformer';
import { TraceRequestEncoder } from './trace-request';

/** The component type the SDK's own OTLP http span exporter reports in its self-observability metrics. */
const COMPONENT_TYPE = 'otlp_http_span_exporter';

/**
 * The request side is Triad's encoder (the same bytes, less CPU: see TraceRequestEncoder); responses are the SDK's.
 * One encoder per serializer: its buffer and string cache are reused by every export of one exporter, and exports
 * serialize synchronously, so they never share it at the same time.
 */
export function traceSerializer(encoder = new TraceRequestEncoder()): ISerializer<ReadableSpan[], IExportTraceServiceResponse> {
  return {
    serializeRequest: (spans) => encoder.encode(spans),
    deserializeResponse: (data) => ProtobufTraceSerializer.deserializeResponse(data),
  };
}

export interface TraceExporterOptions {
  /** The full traces URL (`…/v1/traces`). */
  readonly url: string;
  readonly timeoutMillis: number;
}

/**
 * The OTLP http/protobuf span exporter assembled from the SDK's public parts (`OTLPExporterBase`,
 * `createOtlpHttpExportDelegate`: transport, retries, concurrency limit, timeout), as `OTLPTraceExporter` of
 * @opentelemetry/exporter-trace-otlp-proto assembles it, with `traceSerializer()` in place of
 * `ProtobufTraceSerializer`.
 */
export function createTraceExporter(options: TraceExporterOptions): SpanExporter {
  const http = convertLegacyHttpOptions({ url: options.url, timeoutMillis: options.timeoutMillis }, 'TRACES', 'v1/traces', {
    'Content-Type': 'application/x-protobuf',
  });
  const delegate = createOtlpHttpExportDelegate(http, traceSerializer(), COMPONENT_TYPE, TraceExporterMetricsHelper, undefined);
  return new OTLPExporterBase<ReadableSpan[]>(delegate);
}
