import { InMemorySpanExporter, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import type { Decision } from '@triad/bus';
import {
  finishLegSpan,
  finishRequestSpan,
  finishRouteSpan,
  finishScheduleSpan,
  recordFirstToken,
  startDecodeSpan,
  startEncodeSpan,
  startPrefillSpan,
  startRequestSpan,
  startRouteSpan,
  startScheduleSpan,
  type LegInfo,
} from '../src/gateway-spans';
import type { Traced } from '../src/spans';
import type { ServiceName } from '../src/config';
import { setupTelemetry, type Telemetry } from '../src/setup';

/**
 * Sets tracing up for the enclosing `describe` (100 % sampling into an in-memory exporter, cleared before each
 * test) and returns `finished()`: the spans ended so far, after a flush.
 */
export function useMemoryTelemetry(serviceName: ServiceName = 'triad-gateway'): { finished(): Promise<ReadableSpan[]> } {
  const memory = new InMemorySpanExporter();
  let telemetry: Telemetry;
  beforeAll(() => {
    telemetry = setupTelemetry({ serviceName, version: 't', env: { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9' }, exporter: memory });
  });
  afterAll(async () => {
    await telemetry.shutdown();
  });
  beforeEach(() => memory.reset());
  return {
    async finished() {
      await telemetry.forceFlush();
      return memory.getFinishedSpans();
    },
  };
}

/** A vLLM EPD decision for a request with two images (the shape the scheduler replies with). */
export const epdDecision: Decision = {
  id: 'req-1',
  ok: true,
  mode: 'epd',
  attempts: [
    {
      endpoint: { key: 'default.qwen-vl.decode-0', pod: 'decode-0', ip: '127.0.1.3', port: 8000 },
      prefill: { key: 'default.qwen-vl.prefill-0', pod: 'prefill-0', ip: '127.0.1.2', port: 8000 },
    },
    { endpoint: { key: 'default.qwen-vl.decode-1', pod: 'decode-1', ip: '127.0.1.5', port: 8000 } },
  ],
  encoders: [
    {
      item: 0,
      endpoint: { key: 'default.qwen-vl.encode-0', pod: 'encode-0', ip: '127.0.1.1', port: 8000 },
      alternates: [],
      affinity: true,
    },
    {
      item: 1,
      endpoint: { key: 'default.qwen-vl.encode-1', pod: 'encode-1', ip: '127.0.1.4', port: 8000 },
      alternates: [],
      affinity: false,
    },
  ],
  decidedBy: 'scheduler-0',
};

export function leg(endpoint: { key: string; pod: string; ip: string; port: number }, extra: Partial<LegInfo> = {}): LegInfo {
  return {
    operation: 'chat',
    engine: 'vLLM',
    model: 'Qwen/Qwen2.5-VL-3B-Instruct',
    endpoint,
    mode: 'epd',
    pdGroup: 'g1',
    attempt: 0,
    ...extra,
  };
}

/** Plays the gateway's part for one EPD request with two images, in the order the stage loop runs. */
export function epdRequest(): Traced {
  const req = startRequestSpan({ method: 'POST', route: '/v1/chat/completions', headers: {}, requestId: 'req-1' });
  const route = startRouteSpan(req, { model: 'qwen-vl' });
  finishRouteSpan(route, { namespace: 'default', modelServer: 'qwen-vl', mode: 'epd', modelRoute: 'qwen-vl' }, req);
  const schedule = startScheduleSpan(req, { namespace: 'default', modelServer: 'qwen-vl', mediaItems: 2 });
  finishScheduleSpan(schedule, epdDecision, { batchSize: 1 });
  const [e0, e1] = epdDecision.encoders;
  // Both encode legs start before either ends: the fan-out the trace must show.
  const enc0 = startEncodeSpan(req, { ...leg(e0.endpoint), item: { index: 0, modality: 'image', bytes: 2048, affinity: true } });
  const enc1 = startEncodeSpan(req, { ...leg(e1.endpoint), item: { index: 1, modality: 'image', affinity: false } });
  finishLegSpan(enc0, { statusCode: 200 });
  finishLegSpan(enc1, { statusCode: 200 });
  const prefill = startPrefillSpan(req, leg(epdDecision.attempts[0].prefill!, { maxTokens: 1 }));
  finishLegSpan(prefill, { statusCode: 200, inputTokens: 812 });
  const decode = startDecodeSpan(req, leg(epdDecision.attempts[0].endpoint, { maxTokens: 256, stream: true }));
  recordFirstToken(decode);
  const response = {
    statusCode: 200,
    responseModel: 'Qwen/Qwen2.5-VL-3B-Instruct',
    inputTokens: 812,
    outputTokens: 42,
    finishReasons: ['stop'],
  };
  finishLegSpan(decode, response);
  finishRequestSpan(req, { statusCode: 200, requestModel: 'qwen-vl', operation: 'chat', response });
  return req;
}
