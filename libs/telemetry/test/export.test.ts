import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { startOtlpReceiver, treeShape, type OtlpReceiver, type ReceivedSpan } from '@triad/telemetry/receiver';
import { setupTelemetry, type Telemetry } from '../src/index';
import { traceIdOf } from '../src/spans';
import { epdRequest } from './fixtures';

function byName(spans: readonly ReceivedSpan[], name: string): ReceivedSpan[] {
  return spans.filter((s) => s.name === name);
}

describe('tracing through the real OTLP exporter into a local receiver', () => {
  let receiver: OtlpReceiver;
  beforeAll(async () => {
    receiver = await startOtlpReceiver();
  });
  afterAll(async () => {
    await receiver.close();
  });

  describe('http/protobuf (the default exporter), default settings', () => {
    let telemetry: Telemetry;
    let spans: ReceivedSpan[];
    let traceId: string;
    beforeAll(async () => {
      telemetry = setupTelemetry({
        serviceName: 'triad-gateway',
        version: '1.2.3',
        env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, POD_NAME: 'gateway-0', POD_NAMESPACE: 'triad-system' },
      });
      const before = receiver.stats.protobuf;
      traceId = traceIdOf(epdRequest())!;
      await telemetry.forceFlush();
      spans = await receiver.waitForSpans((s) => s.traceId === traceId, { count: 7 });
      expect(receiver.stats.protobuf).toBeGreaterThan(before);
    });
    afterAll(async () => {
      await telemetry.shutdown();
    });

    it('exports one trace whose tree is request → route, schedule, encode ×2, prefill, decode', () => {
      expect(traceId).toMatch(/^[0-9a-f]{32}$/);
      expect(treeShape(receiver.tree(traceId), (s) => `${s.kind} ${s.name}`, { sorted: true })).toEqual([
        {
          name: 'SERVER POST /v1/chat/completions',
          children: [
            { name: 'CLIENT decode', children: [] },
            { name: 'CLIENT encode', children: [] },
            { name: 'CLIENT encode', children: [] },
            { name: 'CLIENT prefill', children: [] },
            { name: 'CLIENT schedule', children: [] },
            { name: 'INTERNAL route', children: [] },
          ],
        },
      ]);
    });

    it('shows the two encode legs overlapping in time', () => {
      const [a, b] = byName(spans, 'encode').sort((x, y) => x.startMs - y.startMs);
      // The SDK stamps a span's start with Date.now() (1 ms steps) and its end as start + a precise duration, so
      // for these instant legs "overlap" holds to within that 1 ms resolution.
      expect(b.startMs).toBeLessThan(a.endMs + 1);
      expect(
        byName(spans, 'encode')
          .map((s) => s.attributes['triad.encoder.item_index'])
          .sort(),
      ).toEqual([0, 1]);
    });

    it('sets the resource from the app and the downward-API env', () => {
      expect(spans[0].resource).toEqual(
        expect.objectContaining({
          'service.name': 'triad-gateway',
          'service.version': '1.2.3',
          'k8s.pod.name': 'gateway-0',
          'k8s.namespace.name': 'triad-system',
          'service.instance.id': 'gateway-0',
        }),
      );
    });

    it('puts GenAI and triad attributes on the legs', () => {
      const decode = byName(spans, 'decode')[0];
      expect(decode.attributes).toEqual(
        expect.objectContaining({
          'gen_ai.operation.name': 'chat',
          'gen_ai.provider.name': 'vllm',
          'gen_ai.request.model': 'Qwen/Qwen2.5-VL-3B-Instruct',
          'gen_ai.response.model': 'Qwen/Qwen2.5-VL-3B-Instruct',
          'gen_ai.usage.input_tokens': 812,
          'gen_ai.usage.output_tokens': 42,
          'gen_ai.request.max_tokens': 256,
          'gen_ai.request.stream': true,
          'gen_ai.response.finish_reasons': ['stop'],
          'server.address': '127.0.1.3',
          'server.port': 8000,
          'http.response.status_code': 200,
          'triad.stage': 'decode',
          'triad.role': 'decode',
          'triad.mode': 'epd',
          'triad.pd_group': 'g1',
          'triad.attempt': 0,
          'triad.endpoint.pod': 'decode-0',
          'triad.endpoint.key': 'default.qwen-vl.decode-0',
        }),
      );
      expect(decode.attributes['gen_ai.response.time_to_first_chunk']).toEqual(expect.any(Number));
      expect(decode.events.map((e) => e.name)).toEqual(['first_token']);
      const enc0 = byName(spans, 'encode').find((s) => s.attributes['triad.encoder.item_index'] === 0)!;
      expect(enc0.attributes).toEqual(
        expect.objectContaining({
          'triad.stage': 'encode',
          'triad.cache_affinity_hit': true,
          'triad.encoder.modality': 'image',
          'triad.encoder.item_bytes': 2048,
        }),
      );
      expect(byName(spans, 'prefill')[0].attributes['gen_ai.request.max_tokens']).toBe(1);
    });

    it('records the decision on the schedule span and the route on the request span', () => {
      expect(byName(spans, 'schedule')[0].attributes).toEqual(
        expect.objectContaining({
          'triad.decision.endpoint': 'default.qwen-vl.decode-0',
          'triad.decision.prefill': 'default.qwen-vl.prefill-0',
          'triad.decision.encoders': ['default.qwen-vl.encode-0', 'default.qwen-vl.encode-1'],
          'triad.decision.encoder_affinity_hits': 1,
          'triad.decision.top_n': 2,
          'triad.decision.alternates': ['default.qwen-vl.decode-1'],
          'triad.decision.decided_by': 'scheduler-0',
          'triad.schedule.batch_size': 1,
          'messaging.system': 'nats',
          'messaging.destination.name': 'triad.v1.schedule',
        }),
      );
      const request = byName(spans, 'POST /v1/chat/completions')[0];
      expect(request.attributes).toEqual(
        expect.objectContaining({
          'http.request.method': 'POST',
          'http.route': '/v1/chat/completions',
          'http.response.status_code': 200,
          'triad.request.id': 'req-1',
          'triad.model_server': 'qwen-vl',
          'triad.mode': 'epd',
          'gen_ai.request.model': 'qwen-vl',
          'gen_ai.usage.output_tokens': 42,
        }),
      );
      expect(request.status.code).toBe('UNSET');
    });
  });

  describe('http/json exporter', () => {
    it('is decoded the same way', async () => {
      const before = receiver.stats.json;
      const telemetry = setupTelemetry({
        serviceName: 'triad-scheduler',
        version: '0.0.1',
        env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url },
        exporter: new JsonExporter({ url: receiver.tracesUrl }),
      });
      try {
        const traceId = traceIdOf(epdRequest())!;
        await telemetry.forceFlush();
        const spans = await receiver.waitForSpans((s) => s.traceId === traceId, { count: 7 });
        expect(receiver.stats.json).toBeGreaterThan(before);
        expect(spans[0].serviceName).toBe('triad-scheduler');
        expect(treeShape(receiver.tree(traceId), undefined, { sorted: true })[0].children.map((c) => c.name)).toEqual([
          'decode',
          'encode',
          'encode',
          'prefill',
          'route',
          'schedule',
        ]);
      } finally {
        await telemetry.shutdown();
      }
    });
  });
});

describe("the SDK's tracer (TRIAD_TRACE_RECORDER=sdk) behind the same NodeSDK pipeline", () => {
  let receiver: OtlpReceiver;
  let telemetry: Telemetry;
  let spans: ReceivedSpan[];
  let traceId: string;
  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    telemetry = setupTelemetry({
      serviceName: 'triad-gateway',
      version: '1.2.3',
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, POD_NAME: 'gateway-0', TRIAD_TRACE_RECORDER: 'sdk' },
    });
    expect(telemetry.config.spanRecorder).toBe('sdk');
    traceId = traceIdOf(epdRequest())!;
    await telemetry.forceFlush();
    spans = await receiver.waitForSpans((s) => s.traceId === traceId, { count: 7 });
  });
  afterAll(async () => {
    await telemetry.shutdown();
    await receiver.close();
  });

  it('exports the same trace: tree, resource and attributes', () => {
    expect(treeShape(receiver.tree(traceId), (s) => `${s.kind} ${s.name}`, { sorted: true })).toEqual([
      {
        name: 'SERVER POST /v1/chat/completions',
        children: ['CLIENT decode', 'CLIENT encode', 'CLIENT encode', 'CLIENT prefill', 'CLIENT schedule', 'INTERNAL route'].map(
          (name) => ({ name, children: [] }),
        ),
      },
    ]);
    expect(spans[0].resource).toEqual(
      expect.objectContaining({
        'service.name': 'triad-gateway',
        'service.version': '1.2.3',
        'k8s.pod.name': 'gateway-0',
      }),
    );
    const decode = byName(spans, 'decode')[0];
    expect(decode.attributes).toEqual(
      expect.objectContaining({
        'gen_ai.usage.output_tokens': 42,
        'triad.stage': 'decode',
        'triad.endpoint.key': 'default.qwen-vl.decode-0',
      }),
    );
    expect(decode.events.map((e) => e.name)).toEqual(['first_token']);
    expect(byName(spans, 'schedule')[0].attributes['triad.decision.encoders']).toEqual([
      'default.qwen-vl.encode-0',
      'default.qwen-vl.encode-1',
    ]);
  });
});
