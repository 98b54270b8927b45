import { DispatchBatchSchema } from './dispatch';
import { readDispatchBatch } from './dispatch-read';
import { variantOf } from '../test/variant';

const start = {
  type: 'start',
  requestId: 'req-1',
  endpoint: 'default.epd.epd-p-0',
  stage: 'prefill',
  at: 1_765_000_000_000,
  inputTokens: 600,
};
const finish = {
  type: 'finish',
  requestId: 'req-1',
  endpoint: 'default.epd.epd-d-0',
  stage: 'decode',
  at: 1_765_000_000_120,
  ok: true,
  inputTokens: 600,
  outputTokens: 16,
  ttftMs: 41.5,
  tpotMs: 3.25,
};
const full = {
  v: 1,
  gateway: 'gw-a',
  seq: 7,
  events: [start, finish],
  inflight: { 'default.epd.epd-p-0': 1, 'default.epd.epd-d-0': 0 },
  snapshotIntervalMs: 1000,
};

/** A change of the first event (index 0) of `full`. */
const event = (change: Record<string, unknown>): Record<string, unknown> => ({ events: [{ ...start, ...change }, finish] });

/** One change of `full` per entry: a field removed, replaced or added, in the batch, an event or the snapshot. */
const variants: [string, Record<string, unknown>][] = [
  ['as is', {}],
  ['only the required fields', { inflight: undefined, snapshotIntervalMs: undefined, events: [] }],
  ['another schema version', { v: 2 }],
  ['version as a string', { v: '1' }],
  ['gateway a number', { gateway: 3 }],
  ['negative seq', { seq: -1 }],
  ['fractional seq', { seq: 1.5 }],
  ['unsafe seq', { seq: 2 ** 60 }],
  ['events not an array', { events: {} }],
  ['an event null', { events: [null] }],
  ['an event an array', { events: [['start']] }],
  ['an unknown event type', event({ type: 'abort' })],
  ['an unknown stage', event({ stage: 'embed' })],
  ['request id a number', event({ requestId: 1 })],
  ['no endpoint', event({ endpoint: undefined })],
  ['at fractional', event({ at: 1.5 })],
  ['at negative (allowed)', event({ at: -3 })],
  ['at a string', event({ at: '1' })],
  ['ok a string', event({ ok: 'true' })],
  ['negative input tokens', event({ inputTokens: -1 })],
  ['fractional output tokens', event({ outputTokens: 0.5 })],
  ['negative ttft', event({ ttftMs: -0.1 })],
  ['infinite tpot', event({ tpotMs: Number.POSITIVE_INFINITY })],
  ['NaN ttft', event({ ttftMs: Number.NaN })],
  ['zero ttft and tpot', event({ ttftMs: 0, tpotMs: 0 })],
  ['an unknown event field', event({ priority: 1 })],
  ['inflight an array', { inflight: [1] }],
  ['inflight null', { inflight: null }],
  ['a negative count', { inflight: { a: -1 } }],
  ['a fractional count', { inflight: { a: 0.5 } }],
  ['a count as a string', { inflight: { a: '1' } }],
  ['an empty snapshot', { inflight: {} }],
  ['snapshot interval 0', { snapshotIntervalMs: 0 }],
  ['snapshot interval fractional', { snapshotIntervalMs: 1.5 }],
  ['an unknown batch field', { priority: 1 }],
];

function variant(change: Record<string, unknown>): Record<string, unknown> {
  return variantOf(full, change, 'events');
}

describe('readDispatchBatch (the dispatch feed hot path) against DispatchBatchSchema', () => {
  it.each(variants)('%s: reads what the schema accepts the way the schema does, and nothing it refuses', (_name, change) => {
    const parsed = DispatchBatchSchema.safeParse(variant(change));
    const read = readDispatchBatch(variant(change));
    if (!parsed.success) expect(read).toBeUndefined();
    // A batch the fast path passes on to the schema (a field to drop) is still read by the schema: not compared.
    else if (read !== undefined) expect(read).toEqual(parsed.data);
  });

  it('reads every well-formed batch itself (the schema runs only for what it refuses or must strip)', () => {
    expect(readDispatchBatch(variant({}))).toEqual(full);
    expect(readDispatchBatch({ v: 1, gateway: 'g', seq: 0, events: [] })).toEqual({ v: 1, gateway: 'g', seq: 0, events: [] });
    expect(readDispatchBatch(variant({ priority: 1 }))).toBeUndefined();
    expect(readDispatchBatch(variant(event({ priority: 1 })))).toBeUndefined();
    expect(readDispatchBatch(null)).toBeUndefined();
    expect(readDispatchBatch([full])).toBeUndefined();
  });

  it('leaves a snapshot with a `__proto__` key (as JSON.parse makes it) to the schema, which does not count it', () => {
    const raw = JSON.parse('{"v":1,"gateway":"g","seq":1,"events":[],"inflight":{"__proto__":5,"a":1}}') as unknown;
    expect(readDispatchBatch(raw)).toBeUndefined();
    const parsed = DispatchBatchSchema.parse(raw);
    expect(Object.keys(parsed.inflight ?? {})).toEqual(['a']);
  });
});

/** `full` with more events in `packed`: a start and finish on the prefill, then a decode leg with TTFT and TPOT. */
const packed = {
  at: 1_765_000_000_200,
  requests: ['req-2', 'req-3'],
  endpoints: ['default.epd.epd-p-0', 'default.epd.epd-d-0'],
  legs: [
    ['sp', 0, 0, 0, 600],
    ['fp', 0, 0, 35, 35.2],
    ['sd', 1, 1, -5],
    ['fd', 1, 1, 90, 41.5, 3.25],
    ['fe', 0, 0, 91],
  ],
};
const withPacked = { ...full, packed };
/** The events `packed` stands for. */
const packedEvents = [
  { type: 'start', requestId: 'req-2', endpoint: 'default.epd.epd-p-0', stage: 'prefill', at: 1_765_000_000_200, inputTokens: 600 },
  { type: 'finish', requestId: 'req-2', endpoint: 'default.epd.epd-p-0', stage: 'prefill', at: 1_765_000_000_235, ttftMs: 35.2 },
  { type: 'start', requestId: 'req-3', endpoint: 'default.epd.epd-d-0', stage: 'decode', at: 1_765_000_000_195 },
  {
    type: 'finish',
    requestId: 'req-3',
    endpoint: 'default.epd.epd-d-0',
    stage: 'decode',
    at: 1_765_000_000_290,
    ttftMs: 41.5,
    tpotMs: 3.25,
  },
  { type: 'finish', requestId: 'req-2', endpoint: 'default.epd.epd-p-0', stage: 'encode', at: 1_765_000_000_291 },
];

/** A change of the fourth leg (a finish with TTFT and TPOT) of `packed`. */
const leg = (value: unknown[]): Record<string, unknown> => ({ legs: [...packed.legs.slice(0, 3), value, packed.legs[4]] });

const packedVariants: [string, Record<string, unknown>][] = [
  ['as is', {}],
  ['no legs', { legs: [] }],
  ['no tables and no legs', { requests: [], endpoints: [], legs: [] }],
  ['at a string', { at: '1' }],
  ['at fractional', { at: 1.5 }],
  ['no at', { at: undefined }],
  ['a request id a number', { requests: ['req-2', 3] }],
  ['endpoints not an array', { endpoints: 'default.epd.epd-p-0' }],
  ['legs not an array', { legs: {} }],
  ['an unknown packed field', { priority: 1 }],
  ['a leg not an array', leg({ code: 'fd' } as unknown as unknown[])],
  ['a leg of three', leg(['fd', 1, 1])],
  ['an unknown code', leg(['xd', 1, 1, 90])],
  ['a code in capitals', leg(['FD', 1, 1, 90])],
  ['a code a number', leg([4, 1, 1, 90])],
  ['a request index past its table', leg(['fd', 2, 1, 90])],
  ['an endpoint index past its table', leg(['fd', 1, 2, 90])],
  ['a negative index', leg(['fd', -1, 1, 90])],
  ['a fractional index', leg(['fd', 0.5, 1, 90])],
  ['a fractional time', leg(['fd', 1, 1, 0.5])],
  ['a time past a safe integer', leg(['fd', 1, 1, 2 ** 53])],
  ['a finish without latency', leg(['fd', 1, 1, 90])],
  ['a finish with TTFT only', leg(['fd', 1, 1, 90, 0])],
  ['a finish with three figures', leg(['fd', 1, 1, 90, 1, 2, 3])],
  ['a negative TTFT', leg(['fd', 1, 1, 90, -0.1])],
  ['an infinite TPOT', leg(['fd', 1, 1, 90, 1, Number.POSITIVE_INFINITY])],
  ['a NaN TTFT', leg(['fd', 1, 1, 90, Number.NaN])],
  ['a null TTFT', leg(['fd', 1, 1, 90, null])],
  ['a start with input tokens', leg(['sd', 1, 1, 90, 12])],
  ['a start with fractional input tokens', leg(['sd', 1, 1, 90, 1.5])],
  ['a start with two figures', leg(['sd', 1, 1, 90, 12, 1])],
];

function packedVariant(change: Record<string, unknown>): Record<string, unknown> {
  const out = structuredClone(packed) as Record<string, unknown>;
  for (const [k, v] of Object.entries(change)) {
    if (v === undefined) delete out[k];
    else out[k] = structuredClone(v);
  }
  return { ...structuredClone(full), packed: out };
}

describe('packed dispatch legs', () => {
  it.each(packedVariants)('%s: the hand reader takes what the schema takes, and makes the same events', (_name, change) => {
    const parsed = DispatchBatchSchema.safeParse(packedVariant(change));
    const read = readDispatchBatch(packedVariant(change));
    if (!parsed.success) expect(read).toBeUndefined();
    else if (read !== undefined) expect(read).toEqual(parsed.data);
    // Everything but an unknown field is either read by hand or refused by both.
    if (parsed.success && change['priority'] === undefined) expect(read).toBeDefined();
  });

  it('reads the packed legs as events after those sent as objects, in order, without the packed field', () => {
    const expected = { ...full, events: [...full.events, ...packedEvents] };
    expect(readDispatchBatch(structuredClone(withPacked))).toEqual(expected);
    expect(DispatchBatchSchema.parse(structuredClone(withPacked))).toEqual(expected);
    expect(readDispatchBatch(structuredClone(withPacked))).not.toHaveProperty('packed');
    const alone = { v: 1, gateway: 'g', seq: 3, events: [], packed };
    expect(readDispatchBatch(structuredClone(alone))).toEqual({ v: 1, gateway: 'g', seq: 3, events: packedEvents });
  });

  it('refuses a packed batch whose leg points past its tables, naming the leg', () => {
    const bad = packedVariant(leg(['fd', 5, 1, 90]));
    const parsed = DispatchBatchSchema.safeParse(bad);
    expect(parsed.success).toBe(false);
    expect(parsed.error?.issues[0]?.message).toBe('leg 3: an index out of its table');
  });
});
