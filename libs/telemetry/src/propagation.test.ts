import { InMemorySpanExporter } from '@opentelemetry/sdk-trace-base';
import { isSpanContextValid, propagation, ROOT_CONTEXT, trace } from '@opentelemetry/api';
import { suppressTracing } from '@opentelemetry/core';
import { setupTelemetry, type Telemetry } from './setup';
import {
  BATCH_TRACE_HEADER,
  extractBatchTraceContexts,
  extractTraceContext,
  injectBatchTraceHeaders,
  injectTraceHeaders,
} from './propagation';
import { startTraced } from './spans';

const TP = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';

function spanIdIn(ctx: ReturnType<typeof extractTraceContext>): string | undefined {
  const sc = trace.getSpanContext(ctx);
  return sc && isSpanContextValid(sc) ? sc.spanId : undefined;
}

describe('W3C propagation helpers', () => {
  let telemetry: Telemetry;
  beforeAll(() => {
    telemetry = setupTelemetry({
      serviceName: 'triad-gateway',
      version: 't',
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9' },
      exporter: new InMemorySpanExporter(),
    });
  });
  afterAll(async () => {
    await telemetry.shutdown();
  });

  it('reads HTTP headers (lower case, possibly arrays) and NATS headers (any case, "" for missing)', () => {
    expect(spanIdIn(extractTraceContext({ traceparent: TP }))).toBe('b7ad6b7169203331');
    expect(spanIdIn(extractTraceContext({ traceparent: [TP] }))).toBe('b7ad6b7169203331');
    expect(spanIdIn(extractTraceContext({ Traceparent: TP }))).toBe('b7ad6b7169203331');
    expect(spanIdIn(extractTraceContext({ traceparent: '' }))).toBeUndefined();
    expect(spanIdIn(extractTraceContext({ traceparent: 'garbage' }))).toBeUndefined();
    expect(spanIdIn(extractTraceContext(undefined))).toBeUndefined();
  });

  it('carries tracestate both ways', () => {
    const ctx = extractTraceContext({ traceparent: TP, tracestate: 'vendor=abc' });
    const child = startTraced('child', { parent: ctx });
    const out = injectTraceHeaders(child, { 'content-type': 'application/json' });
    expect(out).toEqual({
      'content-type': 'application/json',
      traceparent: expect.stringMatching(/^00-0af7651916cd43dd8448eb211c80319c-[0-9a-f]{16}-01$/),
      tracestate: 'vendor=abc',
    });
    child.span.end();
  });

  it("writes a span's headers as the propagator does through its context (sampled, unsampled, trace state, suppressed)", () => {
    const viaApi = (t: { context: Parameters<typeof propagation.inject>[0] }): Record<string, string> => {
      const out: Record<string, string> = {};
      propagation.inject(t.context, out);
      return out;
    };
    const parents = [
      extractTraceContext({ traceparent: TP, tracestate: 'vendor=abc,other=1' }),
      extractTraceContext({ traceparent: TP.replace(/-01$/, '-00') }),
      ROOT_CONTEXT,
      suppressTracing(extractTraceContext({ traceparent: TP })),
    ];
    for (const parent of parents) {
      const child = startTraced('child', { parent });
      const grandchild = startTraced('grandchild', { parent: child });
      for (const t of [child, grandchild]) {
        const fast = injectTraceHeaders(t);
        expect(fast).toEqual(viaApi(t));
        expect(injectBatchTraceHeaders([t])).toEqual(fast);
      }
      grandchild.span.end();
      child.span.end();
    }
    // The suppressed parent injects nothing, either way.
    expect(injectTraceHeaders(startTraced('s', { parent: parents[3] }))).toEqual({});
  });

  it('batch headers: the first context in traceparent, all of them in triad-trace-batch', () => {
    const a = startTraced('a', { root: true });
    const b = startTraced('b', { root: true });
    const headers = injectBatchTraceHeaders([a, undefined, b]);
    expect(headers['traceparent']).toContain(a.span.spanContext().spanId);
    const back = extractBatchTraceContexts(headers, 3);
    expect(back.map(spanIdIn)).toEqual([a.span.spanContext().spanId, undefined, b.span.spanContext().spanId]);
    expect(injectBatchTraceHeaders([a])[BATCH_TRACE_HEADER]).toBeUndefined();
    a.span.end();
    b.span.end();
  });

  it('batch extraction survives a missing or malformed batch header', () => {
    expect(extractBatchTraceContexts({ traceparent: TP }, 2).map(spanIdIn)).toEqual(['b7ad6b7169203331', undefined]);
    expect(extractBatchTraceContexts({ traceparent: TP, [BATCH_TRACE_HEADER]: '{nope' }, 2).map(spanIdIn)).toEqual([
      'b7ad6b7169203331',
      undefined,
    ]);
    expect(
      extractBatchTraceContexts({ [BATCH_TRACE_HEADER]: JSON.stringify([{ traceparent: 7 }, 'x', { traceparent: TP }]) }, 3).map(spanIdIn),
    ).toEqual([undefined, undefined, 'b7ad6b7169203331']);
    expect(extractBatchTraceContexts(undefined, 2)).toEqual([ROOT_CONTEXT, ROOT_CONTEXT]);
  });
});
