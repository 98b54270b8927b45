import { ROOT_CONTEXT, SpanKind, SpanStatusCode, TraceFlags, trace, type Span } from '@opentelemetry/api';
import { TraceState } from '@opentelemetry/core';
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { TriadTracer, type RecordedSpan } from '../tracer';
import { EncodedStrings } from './encoded-strings';
import { TraceRequestEncoder } from './trace-request';

function sdkBytes(spans: ReadableSpan[]): Buffer {
  return Buffer.from(ProtobufTraceSerializer.serializeRequest(spans)!);
}

/** Spans from the real SDK covering every field the encoder writes. */
function recordVariedSpans(): ReadableSpan[] {
  const memory = new InMemorySpanExporter();
  const resource = resourceFromAttributes({ 'service.name': 'triad-gateway', 'k8s.pod.name': 'gateway-0', 'ünïcode.key': 'värde ✓ 🚀' });
  const provider = new BasicTracerProvider({
    resource,
    spanProcessors: [new SimpleSpanProcessor(memory)],
    spanLimits: { attributeCountLimit: 12, eventCountLimit: 2, linkCountLimit: 1, attributeValueLengthLimit: 64 },
  });
  const tracer = provider.getTracer('@triad/telemetry', '1.2.3');
  const other = provider.getTracer('other-scope', undefined, { schemaUrl: 'https://opentelemetry.io/schemas/1.30.0' });

  const root = tracer.startSpan('POST /v1/chat/completions', {
    kind: SpanKind.SERVER,
    startTime: [1765000000, 123456789],
    attributes: {
      'http.request.method': 'POST',
      'http.response.status_code': 200,
      negative: -42,
      big: 2 ** 60,
      huge: 2 ** 64,
      fraction: 0.25,
      nan: NaN,
      infinite: -Infinity,
      'flag.on': true,
      'flag.off': false,
      empty: '',
      '': 'empty key',
      strings: ['a', '', 'ü'],
      numbers: [1, 2.5, -3],
      bools: [true, false],
      holes: [null, undefined, 'x'] as unknown as string[],
      long: 'x'.repeat(200),
      unicode: 'ünïcödé 日本語 🚀 \ud800 lone',
    },
  });
  root.addEvent('first_token', { 'gen_ai.token.index': 0 }, [1765000000, 523456789]);
  root.addEvent('no attributes');
  root.addEvent('over the limit');
  root.setStatus({ code: SpanStatusCode.OK });
  const rootCtx = trace.setSpan(ROOT_CONTEXT, root);

  const children: Span[] = [];
  for (const [i, kind] of [SpanKind.CLIENT, SpanKind.INTERNAL, SpanKind.PRODUCER, SpanKind.CONSUMER].entries()) {
    const child = tracer.startSpan(`leg ${i}`, { kind, attributes: { 'triad.leg.attempt': i, 'server.address': '127.0.1.3' } }, rootCtx);
    child.setStatus({ code: SpanStatusCode.ERROR, message: i % 2 ? 'upstream 503' : 'ünicode error ✗' });
    children.push(child);
  }
  const linked = other.startSpan(
    'linked',
    {
      links: [
        {
          context: {
            traceId: 'a'.repeat(32),
            spanId: 'b'.repeat(16),
            traceFlags: TraceFlags.SAMPLED,
            isRemote: true,
            traceState: new TraceState('v=1,w=2'),
          },
          attributes: { 'link.kind': 'batch', n: 3 },
        },
        { context: { traceId: 'c'.repeat(32), spanId: 'd'.repeat(16), traceFlags: TraceFlags.NONE } },
      ],
    },
    rootCtx,
  );
  for (let i = 0; i < 14; i++) linked.setAttribute(`attr.${i}`, i);
  const remoteParent = trace.setSpanContext(ROOT_CONTEXT, {
    traceId: '0af7651916cd43dd8448eb211c80319c',
    spanId: 'b7ad6b7169203331',
    traceFlags: TraceFlags.SAMPLED,
    isRemote: true,
    traceState: new TraceState('congo=t61rcWkgMzE,rojo=00f067aa0ba902b7'),
  });
  const fromRemote = tracer.startSpan('from remote parent', { kind: SpanKind.SERVER }, remoteParent);
  fromRemote.setStatus({ code: SpanStatusCode.UNSET, message: '' });
  const emptyName = tracer.startSpan('', {}, rootCtx);

  emptyName.end();
  fromRemote.end();
  linked.end();
  for (const child of children) child.end();
  root.end([1765000001, 999999999]);
  return memory.getFinishedSpans();
}

describe('TraceRequestEncoder writes the SDK serializer’s bytes', () => {
  const spans = recordVariedSpans();

  it('covers what it claims: several scopes, links, events, drops, remote parent, unicode', () => {
    expect(new Set(spans.map((s) => s.instrumentationScope)).size).toBe(2);
    expect(spans.some((s) => s.droppedAttributesCount > 0)).toBe(true);
    expect(spans.some((s) => s.droppedEventsCount > 0)).toBe(true);
    expect(spans.some((s) => s.droppedLinksCount > 0)).toBe(true);
    expect(spans.some((s) => s.parentSpanContext?.isRemote)).toBe(true);
    expect(sdkBytes(spans).length).toBeGreaterThan(1000);
  });

  it('for the whole batch, each span alone, and the empty batch', () => {
    const encoder = new TraceRequestEncoder();
    expect(Buffer.from(encoder.encode(spans))).toEqual(sdkBytes(spans));
    for (const span of spans) expect(Buffer.from(encoder.encode([span]))).toEqual(sdkBytes([span]));
    expect(Buffer.from(encoder.encode([]))).toEqual(sdkBytes([]));
  });

  it('again with a warm cache, and with a cache that starts over every few strings', () => {
    const warm = new TraceRequestEncoder();
    warm.encode(spans);
    expect(Buffer.from(warm.encode(spans))).toEqual(sdkBytes(spans));
    const tiny = new TraceRequestEncoder(new EncodedStrings(3, 8));
    for (let round = 0; round < 3; round++) expect(Buffer.from(tiny.encode(spans))).toEqual(sdkBytes(spans));
  });

  it('returns bytes it no longer touches: a later request does not change an earlier one', () => {
    const encoder = new TraceRequestEncoder();
    const first = encoder.encode(spans.slice(0, 2));
    const copy = Buffer.from(first);
    encoder.encode(spans);
    expect(Buffer.from(first)).toEqual(copy);
  });

  it('for batches larger than the initial buffer (lengths of three varint bytes and more)', () => {
    const many = Array.from({ length: 64 }, () => spans).flat();
    const expected = sdkBytes(many);
    expect(expected.length).toBeGreaterThan(0x4000);
    // Buffer.equals: jest's deep equality walks a buffer this size byte by byte for seconds.
    expect(Buffer.from(new TraceRequestEncoder().encode(many)).equals(expected)).toBe(true);
  });

  it('for strings found not to be ASCII late (a two-byte length written first), and spans of one trace', () => {
    const memory = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(memory)] });
    const tracer = provider.getTracer('@triad/telemetry');
    const root = tracer.startSpan('request', {
      attributes: { late: `${'a'.repeat(150)}ü`, lateShort: 'abc✓', ascii: 'b'.repeat(130), [`${'k'.repeat(140)}é`]: 1 },
    });
    const ctx = trace.setSpan(ROOT_CONTEXT, root);
    for (let i = 0; i < 3; i++) tracer.startSpan(`leg ${i}`, { attributes: { 'triad.stage': 'decode' } }, ctx).end();
    root.end();
    const other = tracer.startSpan('another trace');
    other.end();
    const recorded = memory.getFinishedSpans();
    const encoder = new TraceRequestEncoder();
    expect(Buffer.from(encoder.encode(recorded))).toEqual(sdkBytes(recorded));
    // Again in another order: the trace id kept from the last span must not leak into a span of another trace.
    const reordered = [recorded[4], recorded[0], recorded[4], recorded[1]];
    expect(Buffer.from(encoder.encode(reordered))).toEqual(sdkBytes(reordered));
  });
});

describe('TraceRequestEncoder with the recorder’s spans (ids copied from the bytes they were drawn as)', () => {
  it('writes the SDK serializer’s bytes for traces across many id pools, children, and a remote parent', () => {
    const ended: RecordedSpan[] = [];
    const tracer = new TriadTracer({
      sample: () => true,
      sink: { onEnd: (span) => ended.push(span) },
      origin: { resource: resourceFromAttributes({ 'service.name': 'triad-gateway' }), instrumentationScope: { name: '@triad/telemetry' } },
    });
    const remote = {
      traceId: '0af7651916cd43dd8448eb211c80319c',
      spanId: 'b7ad6b7169203331',
      traceFlags: TraceFlags.SAMPLED,
      isRemote: true,
    };
    const encoder = new TraceRequestEncoder();
    for (let batch = 0; batch < 20; batch++) {
      ended.length = 0;
      // 60 requests of 6 spans, in flight together: their spans end interleaved, as at 32 connections.
      const roots = Array.from({ length: 60 }, (_, i) =>
        tracer.begin('POST /v1/chat/completions', SpanKind.SERVER, i % 10 === 0 ? remote : undefined, undefined),
      );
      for (let leg = 0; leg < 5; leg++)
        for (const root of roots) tracer.begin(`leg ${leg}`, SpanKind.CLIENT, root.spanContext(), undefined).end();
      for (const root of roots) root.end();
      const spans = ended as unknown as ReadableSpan[];
      expect(Buffer.from(encoder.encode(spans)).equals(sdkBytes(spans))).toBe(true);
    }
  });
});
