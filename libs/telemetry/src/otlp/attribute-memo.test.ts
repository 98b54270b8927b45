import { SpanKind, type Attributes, type AttributeValue } from '@opentelemetry/api';
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { resourceFromAttributes } from '@opentelemetry/resources';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { SeededRandom } from '@triad/testing/reliability';
import { RecordedSpan, TriadTracer } from '../tracer';
import { MAX_SLOT_CHANGES, MAX_SLOTS } from './attribute-memo';
import { TraceRequestEncoder } from './trace-request';

// The encoder copies an attribute from the last span of the same name when its key and value are the same at the
// same position. These tests feed one encoder many batches of spans whose attribute lists repeat, change, shift
// and grow the way the memo has to notice, and compare every request with the SDK serializer's bytes.

function sdkBytes(spans: ReadableSpan[]): Buffer {
  return Buffer.from(ProtobufTraceSerializer.serializeRequest(spans)!);
}

function recorder(): { tracer: TriadTracer; ended: RecordedSpan[] } {
  const ended: RecordedSpan[] = [];
  const tracer = new TriadTracer({
    sample: () => true,
    sink: { onEnd: (span) => ended.push(span) },
    origin: {
      resource: resourceFromAttributes({ 'service.name': 'triad-gateway', 'service.version': '1.2.3' }),
      instrumentationScope: { name: '@triad/telemetry', version: '1.2.3' },
    },
  });
  return { tracer, ended };
}

const asSpans = (spans: RecordedSpan[]): ReadableSpan[] => spans as unknown as ReadableSpan[];

/** Values of every kind a slot may see: repeating, unique, non-ASCII, long, numbers at the fast path's edges. */
function valuePool(random: () => number, i: number): AttributeValue {
  const pick: AttributeValue[] = [
    'decode',
    'decode',
    'default/epd-decode-0',
    'default/epd-decode-1',
    `unique-${i}`,
    'ünïcode ✓',
    `${'a'.repeat(118)}é`,
    `${'a'.repeat(23)}é`,
    `${'a'.repeat(30)}\ud800`,
    `é${'a'.repeat(30)}`,
    'a'.repeat(24),
    'x'.repeat(300),
    '',
    200,
    200,
    0,
    -0,
    -1,
    2 ** 31 - 1,
    2 ** 31,
    2 ** 53,
    0.5,
    NaN,
    true,
    false,
    ['a', 'b'],
    [1, 2],
  ];
  return pick[Math.floor(random() * pick.length)];
}

describe('TraceRequestEncoder with repeating attribute lists writes the SDK serializer’s bytes', () => {
  it('over 400 requests of spans whose keys and values repeat, change, go missing and come back', () => {
    const seeded = new SeededRandom(33);
    const random = () => seeded.next();
    const { tracer, ended } = recorder();
    const encoder = new TraceRequestEncoder();
    const keys = ['triad.stage', 'gen_ai.request.model', 'server.address', 'server.port', 'triad.endpoint.key', 'triad.attempt', 'ünï.key'];
    const names = ['route', 'decode', 'POST /v1/chat/completions'];
    let start = 1765000000000;
    for (let request = 0; request < 400; request++) {
      ended.length = 0;
      const spans = 1 + Math.floor(random() * 6);
      for (let s = 0; s < spans; s++) {
        const attributes: Attributes = {};
        for (const key of keys) {
          // Mostly the same value at the same key, sometimes another, sometimes the key is left out (the next
          // keys shift up one position).
          const r = random();
          if (r < 0.1) continue;
          attributes[key] = r < 0.7 ? `${key}-value` : valuePool(random, request);
        }
        const span = tracer.startSpan(names[Math.floor(random() * names.length)], { kind: SpanKind.CLIENT, attributes, startTime: start });
        if (random() < 0.5) span.setAttribute('http.response.status_code', random() < 0.9 ? 200 : 503);
        start += random() * 10;
        span.end(start);
      }
      const expected = sdkBytes(asSpans(ended));
      expect(Buffer.from(encoder.encode(asSpans(ended))).equals(expected)).toBe(true);
    }
  });

  it('when a run of repeating attributes is broken in the middle, cut short, lengthened, rekeyed or reused by an event', () => {
    const { tracer, ended } = recorder();
    const encoder = new TraceRequestEncoder();
    const steady: Attributes = {
      'triad.stage': 'decode',
      'gen_ai.request.model': 'epd',
      'server.port': 8000,
      'triad.mode': 'epd',
      ok: true,
    };
    const lists: Attributes[] = [
      steady,
      steady,
      // A value changed in the middle: the run before it and the run after it are copied, the value encoded.
      { ...steady, 'server.port': 8001 },
      { ...steady, 'server.port': 8001 },
      steady,
      // Fewer attributes than last time, then more again (the tail comes back from the block or is encoded).
      { 'triad.stage': 'decode', 'gen_ai.request.model': 'epd' },
      steady,
      { 'triad.stage': 'decode' },
      { ...steady, extra: 'tail', more: 7 },
      { ...steady, extra: 'tail', more: 7 },
      // Another key in the middle, then the first key missing (every later key one position up).
      { 'triad.stage': 'decode', 'gen_ai.request.model': 'epd', 'server.address': '10.0.0.1', 'triad.mode': 'epd', ok: true },
      { 'gen_ai.request.model': 'epd', 'server.port': 8000, 'triad.mode': 'epd', ok: true },
      steady,
      // Values of other types at a kept position: a string, a fraction, a value the memo never keeps.
      { ...steady, 'server.port': '8000' },
      { ...steady, 'server.port': 0.5 },
      { ...steady, 'server.port': ['8000'] },
      { ...steady, 'server.port': ['8000'] },
      steady,
    ];
    for (const [i, attributes] of lists.entries()) {
      ended.length = 0;
      const span = tracer.startSpan('decode', { attributes });
      // An event of the span's name writes its attributes under another field: the memo starts over for it.
      if (i % 5 === 4) span.addEvent('decode', { 'triad.stage': 'decode', n: i });
      span.end();
      // Two spans of the name in one request: the second copies what the first kept.
      tracer.startSpan('decode', { attributes }).end();
      expect(Buffer.from(encoder.encode(asSpans(ended)))).toEqual(sdkBytes(asSpans(ended)));
    }
  });

  it('when a position’s values keep changing past the point where it stops keeping them, and then repeat again', () => {
    const { tracer, ended } = recorder();
    const encoder = new TraceRequestEncoder();
    for (let request = 0; request < 3 * MAX_SLOT_CHANGES; request++) {
      ended.length = 0;
      const value = request < 2 * MAX_SLOT_CHANGES ? `request-${request}` : 'steady';
      tracer.startSpan('leg', { attributes: { 'triad.request.id': value, 'triad.stage': 'decode', tokens: request } }).end();
      expect(Buffer.from(encoder.encode(asSpans(ended)))).toEqual(sdkBytes(asSpans(ended)));
    }
  });

  it('for more attributes than the memo has positions, and for values whose type changes at a position', () => {
    const { tracer, ended } = recorder();
    const encoder = new TraceRequestEncoder();
    for (let request = 0; request < 6; request++) {
      ended.length = 0;
      const attributes: Attributes = {};
      for (let i = 0; i < MAX_SLOTS + 10; i++) attributes[`attr.${i}`] = i % 3 === 0 ? 'same' : i;
      const shapes: AttributeValue[] = [1, '1', true, 1.5];
      attributes['shape'] = shapes[request % 4];
      tracer.startSpan('wide', { attributes }).end();
      expect(Buffer.from(encoder.encode(asSpans(ended)))).toEqual(sdkBytes(asSpans(ended)));
    }
  });

  it('for the recorder’s times: fractions of a millisecond, rounding that carries into the next second', () => {
    const { tracer, ended } = recorder();
    const encoder = new TraceRequestEncoder();
    // Epoch ms as the recorder keeps them (begin takes them as they are). Near the epoch a fraction rounds up to a
    // whole second (999.9999999 ms: 999,999,999.9 ns, written as the next second); at today's times it cannot (a
    // double's step there is about 240 ns), so those cover the split of seconds × 1e9 across the two words.
    const base = 1765000000000;
    const starts = [0, 1e-7, 999.9999999, 1999.99999999, 2 ** 32 + 0.5, base, base + 999 + 0.9999, base + 1234.5678, 4102444800000.001];
    for (const startMs of starts) {
      for (const duration of [0, 0.0001, 0.4999999, 1000.0000005]) {
        const span = tracer.begin('timed', SpanKind.INTERNAL, undefined, startMs);
        // end() takes a number below performance.timeOrigin as a performance.now() reading: past it, as epoch ms.
        span.end(Math.max(startMs + duration, performance.timeOrigin + duration));
      }
    }
    expect(ended.every((span) => span instanceof RecordedSpan)).toBe(true);
    expect(Buffer.from(encoder.encode(asSpans(ended)))).toEqual(sdkBytes(asSpans(ended)));
  });
});
