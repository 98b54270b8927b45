import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { InMemorySpanExporter, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { TraceRequestEncoder } from '../src/otlp/trace-request';
import { setupTelemetry } from '../src/setup';
import { epdRequest } from './fixtures';

/** Three EPD requests' spans as the gateway records them, with `recorder` either span implementation. */
async function gatewaySpans(recorder: 'sdk' | 'recorder'): Promise<ReadableSpan[]> {
  const memory = new InMemorySpanExporter();
  const telemetry = setupTelemetry({
    serviceName: 'triad-gateway',
    version: '1.2.3',
    env: {
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9',
      TRIAD_TRACE_RECORDER: recorder,
      POD_NAME: 'gateway-0',
      POD_NAMESPACE: 'triad-system',
    },
    exporter: memory,
  });
  try {
    for (let i = 0; i < 3; i++) epdRequest();
    await telemetry.forceFlush();
    return memory.getFinishedSpans();
  } finally {
    await telemetry.shutdown();
  }
}

describe.each(['sdk', 'recorder'] as const)('the gateway’s EPD spans (TRIAD_TRACE_RECORDER=%s)', (recorder) => {
  it('encode to the SDK serializer’s bytes, cold and warm', async () => {
    const spans = await gatewaySpans(recorder);
    expect(spans.length).toBeGreaterThanOrEqual(21);
    const expected = Buffer.from(ProtobufTraceSerializer.serializeRequest(spans)!);
    const encoder = new TraceRequestEncoder();
    expect(Buffer.from(encoder.encode(spans))).toEqual(expected);
    expect(Buffer.from(encoder.encode(spans))).toEqual(expected);
  });
});
