import type { ContextManager } from '@opentelemetry/api';
import type { Sampler, SpanExporter } from '@opentelemetry/sdk-trace-base';
import type { SamplerName, TelemetryConfig } from './config';
import { SdkSpanStarter } from './sdk-span-starter';
import type { SpanStarter } from './state';
import { samplerFor, TriadTracer, type EndedSpanSink } from './tracer';

/** What `setupTelemetry` keeps of the SDK: what the helpers start spans with and the pipeline's lifecycle. */
export interface SdkInstance {
  readonly tracer: SpanStarter;
  forceFlush(): Promise<void>;
  shutdown(): Promise<void>;
}

/** The SDK sampler for an `OTEL_TRACES_SAMPLER` name (already validated by readTelemetryConfig). */
function sdkSampler(name: SamplerName, ratio: number): Sampler {
  const { AlwaysOffSampler, AlwaysOnSampler, ParentBasedSampler, TraceIdRatioBasedSampler } =
    require('@opentelemetry/sdk-trace-base') as typeof import('@opentelemetry/sdk-trace-base');
  const base = name.replace(/^parentbased_/, '');
  const root =
    base === 'always_on' ? new AlwaysOnSampler() : base === 'always_off' ? new AlwaysOffSampler() : new TraceIdRatioBasedSampler(ratio);
  return name.startsWith('parentbased_') ? new ParentBasedSampler({ root }) : root;
}

/**
 * Starts OpenTelemetry's `NodeSDK` with what `readTelemetryConfig` read from the `OTEL_*` env: the resource (service
 * name and version, `OTEL_RESOURCE_ATTRIBUTES`, the downward-API pod attributes), the OTLP http/protobuf exporter
 * (with Triad's request encoder, otlp/trace-request.ts) behind a batch span processor (`OTEL_BSP_*`), the sampler
 * and the span limits. The values are passed explicitly (NodeSDK would read `process.env` itself) so that one
 * reader decides, with Triad's rule that tracing is on only with an endpoint. Deliberately off: auto-instrumentation (2–3× the proxy's cost), resource detectors, the metrics
 * and logs pipelines (Prometheus has the metrics), baggage (client baggage is not forwarded to engines), and the
 * context manager: Triad passes parents explicitly and never reads the active context, while the default
 * AsyncLocalStorage manager would switch on async hooks for the whole process and make every `await` dearer.
 * Called only when tracing is enabled, so a disabled service never loads the SDK.
 */
export function startSdk(config: TelemetryConfig, version: string, exporterOverride?: SpanExporter): SdkInstance {
  const { NodeSDK } = require('@opentelemetry/sdk-node') as typeof import('@opentelemetry/sdk-node');
  const { BatchSpanProcessor } = require('@opentelemetry/sdk-trace-base') as typeof import('@opentelemetry/sdk-trace-base');
  const { defaultResource, resourceFromAttributes } = require('@opentelemetry/resources') as typeof import('@opentelemetry/resources');
  const { W3CTraceContextPropagator } = require('@opentelemetry/core') as typeof import('@opentelemetry/core');
  const { trace } = require('@opentelemetry/api') as typeof import('@opentelemetry/api');

  const exporter =
    exporterOverride ??
    (() => {
      // The SDK's http/protobuf exporter with Triad's request encoder: the same bytes for less CPU per span.
      const { createTraceExporter } = require('./otlp/trace-exporter') as typeof import('./otlp/trace-exporter');
      return createTraceExporter({ url: config.tracesUrl, timeoutMillis: config.exportTimeoutMs });
    })();
  const resource = defaultResource().merge(
    resourceFromAttributes({
      ...config.resourceAttributes,
      'service.name': config.serviceName,
      'service.version': version,
    }),
  );
  // The batch processor never blocks span.end(): it appends to a bounded buffer and drops beyond maxQueueSize.
  const processor = new BatchSpanProcessor(exporter, { ...config.batch });
  const sdk = new NodeSDK({
    resource,
    autoDetectResources: false,
    spanProcessors: [processor],
    sampler: sdkSampler(config.sampler, config.samplerRatio),
    spanLimits: { ...config.spanLimits },
    textMapPropagator: new W3CTraceContextPropagator(),
    // NodeSDK's "do not register" (its types do not spell it): no AsyncLocalStorage, no async hooks.
    contextManager: null as unknown as ContextManager,
    instrumentations: [],
    metricReaders: [],
    logRecordProcessors: [],
  });
  sdk.start();
  const tracer: SpanStarter =
    config.spanRecorder === 'recorder'
      ? new TriadTracer({
          sample: samplerFor(config.sampler, config.samplerRatio),
          // The recorder's spans are ReadableSpans in all the processor reads.
          sink: processor as unknown as EndedSpanSink,
          origin: { resource, instrumentationScope: { name: '@triad/telemetry', version } },
          limits: config.spanLimits,
        })
      : new SdkSpanStarter(trace.getTracer('@triad/telemetry', version));
  return {
    tracer,
    forceFlush: () => processor.forceFlush(),
    shutdown: () => sdk.shutdown(),
  };
}
