import { InMemorySpanExporter } from '@opentelemetry/sdk-trace-base';
import { setupTelemetry, type Telemetry } from '@triad/telemetry';

/**
 * Tracing as the traced gateway tests run it: the gateway's service, every span kept in `exporter` (the OTLP
 * endpoint only turns tracing on; nothing listens there). It is process-wide: set it up before the gateway
 * (`startHarness({ tracing: true })`) and shut `telemetry` down in afterAll.
 */
export interface MemoryTracing {
  readonly exporter: InMemorySpanExporter;
  readonly telemetry: Telemetry;
}

export function startMemoryTracing(): MemoryTracing {
  const exporter = new InMemorySpanExporter();
  const telemetry = setupTelemetry({
    serviceName: 'triad-gateway',
    version: 'test',
    env: { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9' },
    exporter,
  });
  return { exporter, telemetry };
}
