import {
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  TraceFlags,
  createTraceState,
  isSpanContextValid,
  type SpanContext,
} from '@opentelemetry/api';
import { SamplingDecision, TraceIdRatioBasedSampler } from '@opentelemetry/sdk-trace-base';
import {
  DEFAULT_SPAN_LIMITS,
  DrawnSpanContext,
  epochNow,
  epochOf,
  hrTimeOf,
  isValidSpanContext,
  RecordedSpan,
  samplerFor,
  TriadTracer,
  type SpanLimits,
} from './tracer';

function collectingTracer(sampler = samplerFor('always_on', 1), limits?: SpanLimits): { tracer: TriadTracer; ended: RecordedSpan[] } {
  const ended: RecordedSpan[] = [];
  const tracer = new TriadTracer({
    sample: sampler,
    sink: { onEnd: (span) => ended.push(span) },
    origin: { resource: { attributes: {} }, instrumentationScope: { name: 'test' } },
    ...(limits ? { limits } : {}),
  });
  return { tracer, ended };
}

function randomTraceId(): string {
  let id = '';
  for (let i = 0; i < 32; i++) id += Math.floor(Math.random() * 16).toString(16);
  return id;
}

const sampledParent: SpanContext = {
  traceId: '0af7651916cd43dd8448eb211c80319c',
  spanId: 'b7ad6b7169203331',
  traceFlags: TraceFlags.SAMPLED,
  isRemote: true,
};
const unsampledParent: SpanContext = { ...sampledParent, traceFlags: TraceFlags.NONE };

describe('samplers', () => {
  it('the ratio sampler gives the SDK TraceIdRatioBasedSampler answer for every trace id (same decision across services)', () => {
    for (const ratio of [0, 0.1, 0.5, 0.9, 1]) {
      const ours = samplerFor('traceidratio', ratio);
      const sdk = new TraceIdRatioBasedSampler(ratio);
      let sampled = 0;
      for (let i = 0; i < 2000; i++) {
        const traceId = randomTraceId();
        const expected = sdk.shouldSample({}, traceId).decision === SamplingDecision.RECORD_AND_SAMPLED;
        expect(ours(undefined, traceId)).toBe(expected);
        if (expected) sampled++;
      }
      if (ratio === 0) expect(sampled).toBe(0);
      if (ratio === 1) expect(sampled).toBe(2000);
    }
  });

  it('parent-based samplers follow the parent flag and use the root sampler only for new traces', () => {
    const parentOff = samplerFor('parentbased_always_off', 1);
    expect(parentOff(undefined, randomTraceId())).toBe(false);
    expect(parentOff(sampledParent, sampledParent.traceId)).toBe(true);
    const parentOn = samplerFor('parentbased_always_on', 1);
    expect(parentOn(undefined, randomTraceId())).toBe(true);
    expect(parentOn(unsampledParent, unsampledParent.traceId)).toBe(false);
    // Non-parent-based samplers ignore the caller's flag.
    expect(samplerFor('always_on', 1)(unsampledParent, unsampledParent.traceId)).toBe(true);
    expect(samplerFor('always_off', 1)(sampledParent, sampledParent.traceId)).toBe(false);
  });
});

describe('epochOf', () => {
  it('reads performance.now() values (also ones slightly ahead) on the spans clock, and passes epoch ms and Dates through', () => {
    const perf = performance.now();
    const now = epochNow();
    expect(Math.abs(epochOf(perf) - now)).toBeLessThan(50);
    expect(epochOf(perf + 0.25) - epochOf(perf)).toBeCloseTo(0.25, 6);
    const wall = Date.now();
    expect(epochOf(wall)).toBe(wall);
    expect(epochOf(new Date(1_700_000_000_123))).toBe(1_700_000_000_123);
    expect(epochOf([1_700_000_000, 500_000_000])).toBe(1_700_000_000_500);
  });
});

describe('TriadTracer', () => {
  it('a child continues the parent trace with a new span id and keeps its trace state', () => {
    const { tracer } = collectingTracer();
    const parent = { ...sampledParent, traceState: createTraceState('vendor=x') };
    const span = tracer.begin('child', SpanKind.CLIENT, parent, undefined) as RecordedSpan;
    expect(span).toBeInstanceOf(RecordedSpan);
    const sc = span.spanContext();
    expect(sc.traceId).toBe(parent.traceId);
    expect(sc.spanId).toMatch(/^[0-9a-f]{16}$/);
    expect(sc.spanId).not.toBe(parent.spanId);
    expect(sc.traceFlags).toBe(TraceFlags.SAMPLED);
    expect(sc.traceState?.serialize()).toBe('vendor=x');
    expect(span.parentSpanContext).toBe(parent);
    expect(span.kind).toBe(SpanKind.CLIENT);
  });

  it('a root span gets a fresh 32-hex trace id; a dropped span is non-recording but still carries ids', () => {
    const { tracer, ended } = collectingTracer(samplerFor('always_off', 0));
    let built = 0;
    const span = tracer.begin('dropped', SpanKind.SERVER, undefined, undefined, () => {
      built++;
      return { a: 1 };
    });
    expect(span).not.toBeInstanceOf(RecordedSpan);
    expect(span.isRecording()).toBe(false);
    expect(span.spanContext().traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(span.spanContext().traceFlags).toBe(TraceFlags.NONE);
    expect(built).toBe(0);
    span.end();
    expect(ended).toHaveLength(0);
  });

  it('hands a span to the sink exactly once, and ignores changes after end', () => {
    const { tracer, ended } = collectingTracer();
    const span = tracer.begin('once', SpanKind.INTERNAL, undefined, undefined, () => ({ a: 'x' })) as RecordedSpan;
    span.setAttribute('b', 2).addEvent('e1', { k: 'v' }).setStatus({ code: SpanStatusCode.ERROR, message: 'boom' });
    span.end();
    span.end();
    span.setAttribute('c', 3).addEvent('late').updateName('renamed').setStatus({ code: SpanStatusCode.OK });
    expect(ended).toEqual([span]);
    expect(span.attributes).toEqual({ a: 'x', b: 2 });
    expect(span.events.map((e) => e.name)).toEqual(['e1']);
    expect(span.name).toBe('once');
    expect(span.status).toEqual({ code: SpanStatusCode.ERROR, message: 'boom' });
    expect(span.isRecording()).toBe(false);
  });

  it('applies the attribute count and value-length limits as the SDK does, counting what it drops', () => {
    const { tracer } = collectingTracer(undefined, { ...DEFAULT_SPAN_LIMITS, attributeCountLimit: 2, attributeValueLengthLimit: 3 });
    const span = tracer.begin('limited', SpanKind.INTERNAL, undefined, undefined, () => ({
      a: 'abcdef',
      b: ['long', 'xy'],
      c: true,
    })) as RecordedSpan;
    expect(span.attributes).toEqual({ a: 'abc', b: ['lon', 'xy'] });
    expect(span.droppedAttributesCount).toBe(1);
    span.setAttribute('a', 'zzzz'); // overwriting an existing key is not a new attribute
    span.setAttribute('d', 1);
    expect(span.attributes).toEqual({ a: 'zzz', b: ['lon', 'xy'] });
    expect(span.droppedAttributesCount).toBe(2);
    span.setAttribute('e', undefined);
    expect(span.droppedAttributesCount).toBe(2);
  });

  it('keeps the newest events up to the limit and counts the dropped ones', () => {
    const { tracer } = collectingTracer(undefined, { ...DEFAULT_SPAN_LIMITS, eventCountLimit: 2 });
    const span = tracer.begin('events', SpanKind.INTERNAL, undefined, undefined) as RecordedSpan;
    for (const name of ['e1', 'e2', 'e3']) span.addEvent(name);
    expect(span.events.map((e) => e.name)).toEqual(['e2', 'e3']);
    expect(span.droppedEventsCount).toBe(1);
  });

  it('records exceptions as exception events with type, message and stack', () => {
    const { tracer } = collectingTracer();
    const span = tracer.begin('ex', SpanKind.INTERNAL, undefined, undefined) as RecordedSpan;
    const error = Object.assign(new Error('refused'), { code: 'ECONNREFUSED' });
    span.recordException(error);
    expect(span.events).toHaveLength(1);
    expect(span.events[0].name).toBe('exception');
    expect(span.events[0].attributes).toMatchObject({ 'exception.type': 'ECONNREFUSED', 'exception.message': 'refused' });
    expect(String(span.events[0].attributes?.['exception.stacktrace'])).toContain('refused');
  });

  it('reports start, end and duration as HrTime; an end before the start is clamped to the start', () => {
    const { tracer } = collectingTracer();
    const start = Date.UTC(2026, 0, 1, 0, 0, 0) + 0.25;
    const span = tracer.begin('times', SpanKind.INTERNAL, undefined, start) as RecordedSpan;
    span.end(new Date(start + 1500));
    expect(span.startTime).toEqual(hrTimeOf(start));
    expect(span.duration[0]).toBe(1);
    expect(Math.abs(span.duration[1] - 499_750_000)).toBeLessThan(1000);
    const early = tracer.begin('early', SpanKind.INTERNAL, undefined, start) as RecordedSpan;
    early.end(new Date(start - 10));
    expect(early.duration).toEqual([0, 0]);
  });

  it('startSpan (the API entry) reads the parent from a context and honours root and attributes', () => {
    const { tracer } = collectingTracer();
    const ctx = trace.setSpanContext(ROOT_CONTEXT, sampledParent);
    const child = tracer.startSpan('api-child', { attributes: { x: 1 } }, ctx) as RecordedSpan;
    expect(child.spanContext().traceId).toBe(sampledParent.traceId);
    expect(child.attributes).toEqual({ x: 1 });
    const root = tracer.startSpan('api-root', { root: true }, ctx);
    expect(root.spanContext().traceId).not.toBe(sampledParent.traceId);
  });
});

describe('DrawnSpanContext', () => {
  /** The bytes a context says its ids were drawn as, as hex (undefined where it names no pool). */
  function drawnHex(ids: DrawnSpanContext): { trace: string | undefined; span: string | undefined } {
    const hex = (pool: DataView | undefined, at: number, n: number) =>
      pool === undefined ? undefined : Buffer.from(pool.buffer, pool.byteOffset + at, n).toString('hex');
    return { trace: hex(ids.traceIdPool, ids.traceIdAt, 16), span: hex(ids.spanIdPool, ids.spanIdAt, 8) };
  }

  it('names the bytes each hex id was cut from, and they stay so after the pool is refilled many times', () => {
    const { tracer, ended } = collectingTracer();
    // 3,000 roots with a child each: 3,000 × (16 + 8 + 8) bytes, more than twenty 4 KiB pools.
    for (let i = 0; i < 3000; i++) {
      const root = tracer.begin('root', SpanKind.SERVER, undefined, undefined);
      tracer.begin('child', SpanKind.CLIENT, root.spanContext(), undefined).end();
      root.end();
    }
    expect(ended).toHaveLength(6000);
    for (const span of ended) {
      const ids = span.spanContext();
      expect(ids).toBeInstanceOf(DrawnSpanContext);
      expect(drawnHex(ids as DrawnSpanContext)).toEqual({ trace: ids.traceId, span: ids.spanId });
    }
  });

  it('names no trace id bytes under a remote parent (its trace id is hex from a header), its own span id’s all the same', () => {
    const { tracer, ended } = collectingTracer();
    tracer.begin('from remote', SpanKind.SERVER, sampledParent, undefined).end();
    const ids = ended[0].spanContext() as DrawnSpanContext;
    expect(ids.traceId).toBe(sampledParent.traceId);
    expect(drawnHex(ids)).toEqual({ trace: undefined, span: ids.spanId });
  });
});

describe('isValidSpanContext', () => {
  it('answers as the API’s isSpanContextValid for drawn contexts, remote-rooted ones and invalid ones', () => {
    const { tracer, ended } = collectingTracer();
    for (let i = 0; i < 1000; i++) {
      const root = tracer.begin('root', SpanKind.SERVER, i % 4 === 0 ? sampledParent : undefined, undefined);
      tracer.begin('child', SpanKind.CLIENT, root.spanContext(), undefined).end();
      root.end();
    }
    const contexts: SpanContext[] = ended.map((span) => span.spanContext());
    contexts.push(
      sampledParent,
      { ...sampledParent, traceId: '0'.repeat(32) },
      { ...sampledParent, spanId: 'xyz' },
      { ...sampledParent, traceId: 'short' },
    );
    for (const sc of contexts) expect(isValidSpanContext(sc)).toBe(isSpanContextValid(sc));
    expect(contexts.filter((sc) => !isValidSpanContext(sc))).toHaveLength(3);
  });
});
