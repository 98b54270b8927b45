import { SpanKind, SpanStatusCode, ROOT_CONTEXT, trace, type Tracer } from '@opentelemetry/api';
import { JsonTraceSerializer, ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { gzipSync } from 'node:zlib';
import { startOtlpReceiver, treeShape, type OtlpReceiver, type ReceivedSpan } from './index';

// The bodies are made by the OTLP exporters' own serializers (@opentelemetry/otlp-transformer), byte for byte
// what exporter-trace-otlp-proto / -http send; test/export.test.ts runs the real exporter end to end.

type Format = 'protobuf' | 'json';

/** Records a trace with a private provider and returns it as an OTLP export body plus its trace id. */
function exportBody(format: Format, emit: (tracer: Tracer) => string): { body: Uint8Array; traceId: string } {
  const memory = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': 'triad-test', 'k8s.pod.name': 'pod-0' }),
    spanProcessors: [new SimpleSpanProcessor(memory)],
  });
  const traceId = emit(provider.getTracer('receiver-test', '1.2.3'));
  const spans = memory.getFinishedSpans();
  const body = (format === 'protobuf' ? ProtobufTraceSerializer : JsonTraceSerializer).serializeRequest(spans);
  if (!body) throw new Error('serializer produced nothing');
  return { body, traceId };
}

async function post(url: string, format: Format, body: Uint8Array, gzip = false): Promise<Response> {
  const headers: Record<string, string> = { 'content-type': format === 'protobuf' ? 'application/x-protobuf' : 'application/json' };
  if (gzip) headers['content-encoding'] = 'gzip';
  return fetch(url, { method: 'POST', headers, body: gzip ? gzipSync(body) : body });
}

/** Emits a small trace exercising every field the receiver decodes; returns its trace id. */
function emitTrace(tracer: Tracer): string {
  const root = tracer.startSpan('POST /v1/chat/completions', { kind: SpanKind.SERVER }, ROOT_CONTEXT);
  const rootCtx = trace.setSpan(ROOT_CONTEXT, root);
  const child = tracer.startSpan(
    'encode',
    {
      kind: SpanKind.CLIENT,
      attributes: {
        'gen_ai.request.model': 'qwen',
        'server.port': 8000,
        'triad.ratio': 0.25,
        'triad.hit': true,
        'triad.keys': ['a', 'b'],
        'triad.counts': [1, 2, 3],
        'triad.big': -42,
      },
      links: [{ context: root.spanContext(), attributes: { why: 'test' } }],
    },
    rootCtx,
  );
  child.addEvent('first_token', { 'triad.attempt': 1 });
  child.setStatus({ code: SpanStatusCode.ERROR, message: 'engine answered 503' });
  child.end();
  const internal = tracer.startSpan('route', {}, rootCtx);
  internal.end();
  root.setStatus({ code: SpanStatusCode.OK });
  root.end();
  return root.spanContext().traceId;
}

function expectDecoded(spans: ReceivedSpan[], traceId: string): void {
  const byName = new Map(spans.map((s) => [s.name, s]));
  const root = byName.get('POST /v1/chat/completions')!;
  const encode = byName.get('encode')!;
  expect(root.traceId).toBe(traceId);
  expect(root.parentSpanId).toBeUndefined();
  expect(root.kind).toBe('SERVER');
  expect(root.status).toEqual({ code: 'OK' });
  expect(root.serviceName).toBe('triad-test');
  expect(root.resource['k8s.pod.name']).toBe('pod-0');
  expect(root.scope).toEqual({ name: 'receiver-test', version: '1.2.3' });
  expect(encode.parentSpanId).toBe(root.spanId);
  expect(encode.kind).toBe('CLIENT');
  expect(encode.attributes).toEqual({
    'gen_ai.request.model': 'qwen',
    'server.port': 8000,
    'triad.ratio': 0.25,
    'triad.hit': true,
    'triad.keys': ['a', 'b'],
    'triad.counts': [1, 2, 3],
    'triad.big': -42,
  });
  expect(encode.events).toEqual([expect.objectContaining({ name: 'first_token', attributes: { 'triad.attempt': 1 } })]);
  expect(encode.links).toEqual([{ traceId, spanId: root.spanId, attributes: { why: 'test' } }]);
  expect(encode.status).toEqual({ code: 'ERROR', message: 'engine answered 503' });
  expect(byName.get('route')!.kind).toBe('INTERNAL');
  for (const s of spans) {
    expect(s.traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(s.spanId).toMatch(/^[0-9a-f]{16}$/);
    expect(s.endMs).toBeGreaterThanOrEqual(s.startMs);
    expect(s.durationMs).toBeCloseTo(s.endMs - s.startMs, 3);
    expect(BigInt(s.endTimeUnixNano)).toBeGreaterThanOrEqual(BigInt(s.startTimeUnixNano));
  }
}

describe('OTLP receiver', () => {
  let receiver: OtlpReceiver;
  beforeAll(async () => {
    receiver = await startOtlpReceiver();
  });
  afterAll(async () => {
    await receiver.close();
  });
  beforeEach(() => receiver.clear());

  it.each(['protobuf', 'json'] as const)('decodes %s export bodies of the OTLP exporters', async (format) => {
    const before = receiver.stats[format];
    const { body, traceId } = exportBody(format, emitTrace);
    const res = await post(receiver.tracesUrl, format, body);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe(format === 'protobuf' ? 'application/x-protobuf' : 'application/json');
    expectDecoded(await receiver.waitForSpans((s) => s.traceId === traceId, { count: 3 }), traceId);
    expect(receiver.stats[format]).toBe(before + 1);
  });

  it('decodes gzip-compressed exports', async () => {
    const { body, traceId } = exportBody('protobuf', emitTrace);
    expect((await post(receiver.tracesUrl, 'protobuf', body, true)).status).toBe(200);
    expectDecoded(await receiver.waitForSpans((s) => s.traceId === traceId, { count: 3 }), traceId);
  });

  it('builds the span tree by parent ids, children in start order (or by name when asked)', async () => {
    const { body, traceId } = exportBody('protobuf', (tracer) => {
      // Explicit start times: the SDK's own are Date.now() (1 ms steps), so instant siblings would tie.
      const t0 = Date.now() - 100;
      const root = tracer.startSpan('request', { startTime: t0 }, ROOT_CONTEXT);
      const ctx = trace.setSpan(ROOT_CONTEXT, root);
      const late = tracer.startSpan('b-late', { startTime: t0 + 20 }, ctx);
      const early = tracer.startSpan('z-early', { startTime: t0 + 10 }, ctx);
      tracer.startSpan('grandchild', { startTime: t0 + 11 }, trace.setSpan(ROOT_CONTEXT, early)).end(t0 + 12);
      early.end(t0 + 30);
      late.end(t0 + 40);
      root.end(t0 + 50);
      return root.spanContext().traceId;
    });
    await post(receiver.tracesUrl, 'protobuf', body);
    await receiver.waitForSpans((s) => s.traceId === traceId, { count: 4 });
    const tree = receiver.tree(traceId);
    expect(treeShape(tree)).toEqual([
      {
        name: 'request',
        children: [
          { name: 'z-early', children: [{ name: 'grandchild', children: [] }] },
          { name: 'b-late', children: [] },
        ],
      },
    ]);
    expect(treeShape(tree, undefined, { sorted: true })[0].children.map((c) => c.name)).toEqual(['b-late', 'z-early']);
    expect(tree[0].children[0].span.startMs - tree[0].span.startMs).toBe(10);
  });

  it('shows a span whose parent has not arrived as a root', async () => {
    const { body, traceId } = exportBody('json', (tracer) => {
      const parent = tracer.startSpan('never-exported', {}, ROOT_CONTEXT);
      tracer.startSpan('orphan', {}, trace.setSpan(ROOT_CONTEXT, parent)).end();
      return parent.spanContext().traceId;
    });
    await post(receiver.tracesUrl, 'json', body);
    await receiver.waitForSpans((s) => s.traceId === traceId);
    expect(treeShape(receiver.tree(traceId))).toEqual([{ name: 'orphan', children: [] }]);
  });

  it('serves trace summaries and one trace over GET', async () => {
    const { body, traceId } = exportBody('protobuf', emitTrace);
    await post(receiver.tracesUrl, 'protobuf', body);
    await receiver.waitForSpans((s) => s.traceId === traceId, { count: 3 });
    const list = (await (await fetch(`${receiver.url}/api/traces?limit=5`)).json()) as {
      traces: {
        traceId: string;
        rootName: string;
        spanCount: number;
        errors: number;
      }[];
    };
    expect(list.traces[0]).toEqual(expect.objectContaining({ traceId, rootName: 'POST /v1/chat/completions', spanCount: 3, errors: 1 }));
    const one = (await (await fetch(`${receiver.url}/api/traces/${traceId}`)).json()) as { spans: ReceivedSpan[] };
    expect(one.spans.map((s) => s.name).sort()).toEqual(['POST /v1/chat/completions', 'encode', 'route']);
    expect((await fetch(`${receiver.url}/api/traces/${'0'.repeat(31)}1`)).status).toBe(404);
    expect((await fetch(`${receiver.url}/api/traces/nothex`)).status).toBe(400);
  });

  it('drops the oldest traces beyond maxSpans', async () => {
    const small = await startOtlpReceiver({ maxSpans: 4 });
    try {
      const first = exportBody('protobuf', emitTrace);
      const second = exportBody('protobuf', emitTrace);
      await post(small.tracesUrl, 'protobuf', first.body);
      await post(small.tracesUrl, 'protobuf', second.body);
      await small.waitForSpans((s) => s.traceId === second.traceId, { count: 3 });
      expect(small.traceIds()).toEqual([second.traceId]);
      expect(small.byTrace(first.traceId)).toEqual([]);
    } finally {
      await small.close();
    }
  });

  it('rejects unsupported content types and undecodable bodies', async () => {
    const text = await fetch(receiver.tracesUrl, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'x' });
    expect(text.status).toBe(415);
    const bad = await fetch(receiver.tracesUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/x-protobuf' },
      body: new Uint8Array([0x0a, 0x05, 0x01]),
    });
    expect(bad.status).toBe(400);
    const json = await fetch(receiver.tracesUrl, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{not json' });
    expect(json.status).toBe(400);
    expect(receiver.spans()).toEqual([]);
  });

  it('waitForSpans names what it waited for when it times out', async () => {
    await expect(receiver.waitForSpans((s) => s.name === 'never', { timeoutMs: 50, what: 'a span named never' })).rejects.toThrow(
      'a span named never',
    );
  });
});
