import type { ReceivedSpan } from '@triad/telemetry/receiver';
import { renderTrace, renderTraceList } from './render';

const T0 = 1_796_000_000_000;
const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';

function span(
  name: string,
  spanId: string,
  parentSpanId: string | undefined,
  startOffset: number,
  duration: number,
  extra: Partial<ReceivedSpan> = {},
): ReceivedSpan {
  const startMs = T0 + startOffset;
  const nanos = (ms: number) => (BigInt(Math.round(ms * 1000)) * 1000n).toString();
  return {
    traceId: TRACE,
    spanId,
    ...(parentSpanId ? { parentSpanId } : {}),
    name,
    kind: 'CLIENT',
    startTimeUnixNano: nanos(startMs),
    endTimeUnixNano: nanos(startMs + duration),
    startMs,
    endMs: startMs + duration,
    durationMs: duration,
    attributes: {},
    events: [],
    links: [],
    status: { code: 'UNSET' },
    resource: { 'service.name': 'triad-gateway' },
    serviceName: 'triad-gateway',
    scope: { name: '@triad/telemetry' },
    ...extra,
  };
}

const spans: ReceivedSpan[] = [
  span('decode', 'd', 'r', 60, 40, {
    attributes: { 'server.address': '127.0.1.3', 'server.port': 8000, 'gen_ai.usage.output_tokens': 42 },
    events: [{ name: 'first_token', timeUnixNano: (BigInt(T0 + 70) * 1_000_000n).toString(), attributes: {} }],
  }),
  span('POST /v1/chat/completions', 'r', undefined, 0, 100, {
    kind: 'SERVER',
    attributes: { 'http.response.status_code': 200, 'triad.mode': 'epd' },
  }),
  span('encode', 'e0', 'r', 10, 30, { attributes: { 'triad.encoder.item_index': 0 } }),
  span('encode', 'e1', 'r', 12, 35, {
    attributes: { 'triad.encoder.item_index': 1, 'error.type': '503' },
    status: { code: 'ERROR', message: 'engine answered 503' },
  }),
  span('schedule', 's', 'r', 2, 5),
  span('schedule', 'ss', 's', 3, 3, { kind: 'SERVER', serviceName: 'triad-scheduler', resource: { 'service.name': 'triad-scheduler' } }),
];

describe('renderTrace', () => {
  const text = renderTrace(TRACE, spans);
  const lines = text.split('\n');

  it('heads with the trace id, span count, services and total duration', () => {
    expect(lines[0]).toBe(`trace ${TRACE} · 6 spans · triad-gateway, triad-scheduler · 100.0 ms`);
  });

  it('draws the tree in start order with service, kind, offset and duration', () => {
    const serviceColumn = lines[2].indexOf('SERVICE');
    const spanLines = lines.filter((l) => /(SERVER|CLIENT|INTERNAL) /.test(l));
    expect(spanLines.map((l) => [l.slice(0, serviceColumn).trimEnd(), ...l.slice(serviceColumn).split(/\s+/).slice(0, 4)])).toEqual([
      ['POST /v1/chat/completions', 'triad-gateway', 'SERVER', '+0.00', '100.0'],
      ['├─ schedule', 'triad-gateway', 'CLIENT', '+2.00', '5.00'],
      ['│  └─ schedule', 'triad-scheduler', 'SERVER', '+3.00', '3.00'],
      ['├─ encode', 'triad-gateway', 'CLIENT', '+10.00', '30.00'],
      ['├─ encode', 'triad-gateway', 'CLIENT', '+12.00', '35.00'],
      ['└─ decode', 'triad-gateway', 'CLIENT', '+60.00', '40.00'],
    ]);
  });

  it('makes overlapping encode legs visible on the timeline', () => {
    const bars = lines.filter((l) => l.includes('├─ encode')).map((l) => l.slice(l.indexOf('[') + 1, l.indexOf(']')));
    expect(bars).toHaveLength(2);
    const cells = bars.map((b) => [...b].map((c) => c === '█'));
    const overlap = cells[0].some((on, i) => on && cells[1][i]);
    expect(overlap).toBe(true);
  });

  it('shows key attributes, errors and events under each span', () => {
    expect(text).toContain('server=127.0.1.3:8000 usage.output_tokens=42');
    expect(text).toContain('error.type=503 encoder.item_index=1 status=ERROR "engine answered 503"');
    expect(lines.find((l) => l.includes('├─ encode') && l.includes('+12.00'))).toMatch(/✗$/);
    expect(text).toContain('· first_token at +70.00 ms');
  });

  it('prints every attribute with --all-attributes', () => {
    expect(renderTrace(TRACE, spans, { allAttributes: true })).toContain('triad.encoder.item_index=0');
  });
});

describe('renderTraceList', () => {
  it('lists one line per trace and names a missing root', () => {
    const text = renderTraceList([
      {
        traceId: TRACE,
        rootName: 'POST /v1/chat/completions',
        rootService: 'triad-gateway',
        services: ['triad-gateway'],
        spanCount: 6,
        startMs: T0,
        durationMs: 100,
        errors: 1,
      },
      { traceId: '0'.repeat(31) + '1', rootName: '', rootService: '', services: [], spanCount: 1, startMs: T0, durationMs: 2, errors: 0 },
    ]);
    const lines = text.trim().split('\n');
    expect(lines).toHaveLength(3);
    expect(lines[1]).toMatch(
      new RegExp(
        `^${TRACE}  \\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d\\.\\d{3}\\s+100\\.0\\s+6\\s+1  ` +
          `triad-gateway: POST /v1/chat/completions$`,
      ),
    );
    expect(lines[2]).toContain('(root span not received)');
    expect(renderTraceList([])).toBe('no traces received yet\n');
  });
});
