import type { Decision, DecisionOrError, OutlierRecord, SchedulingRequestInput, Stage } from '@triad/bus';
import { outlierKey } from '@triad/bus';
import { Scheduler } from '../scheduler';
import { buildIndex, keyOf, modelServerRecord, schedulingRequest } from '../testing';
import { TEST_NOW } from '../testing/clock';
import { InflightTracker } from './inflight-tracker';
import { OutlierTable, ejectionOf } from './outlier-table';

function record(pod: string, stage: Stage, over: Partial<OutlierRecord> = {}): OutlierRecord {
  return {
    schemaVersion: 1,
    endpoint: keyOf(pod),
    stage,
    state: 'ejected',
    ejectedAt: TEST_NOW - 1000,
    ejectedUntil: TEST_NOW + 10_000,
    ejections: 1,
    reason: '5xx',
    failures: 5,
    by: 'gw-1',
    ...over,
  };
}

function tableOf(...records: OutlierRecord[]): OutlierTable {
  const t = new OutlierTable();
  for (const r of records) t.apply({ op: 'PUT', key: outlierKey(r.endpoint, r.stage), value: r });
  return t;
}

function ok(d: DecisionOrError): Decision {
  if (!d.ok) throw new Error(`expected a decision, got ${d.code}: ${d.message}`);
  return d;
}

const podOf = (key: string): string => key.split('.')[2];

function decide(s: Scheduler, req: Partial<SchedulingRequestInput> = {}): Decision {
  return ok(s.schedule(schedulingRequest(req), TEST_NOW));
}

describe('OutlierTable and the ejection ceiling', () => {
  it('knows what is ejected now; an expired ejection (half-open) or a restored endpoint is not', () => {
    const t = tableOf(
      record('a', 'aggregated'),
      record('b', 'aggregated', { ejectedUntil: TEST_NOW }),
      record('c', 'aggregated', { state: 'healthy', ejectedUntil: 0 }),
      record('d', 'prefill'),
    );
    expect(t.ejected(keyOf('a'), 'aggregated', TEST_NOW)?.reason).toBe('5xx');
    expect(t.ejected(keyOf('b'), 'aggregated', TEST_NOW)).toBeUndefined();
    expect(t.ejected(keyOf('c'), 'aggregated', TEST_NOW)).toBeUndefined();
    expect(t.ejected(keyOf('d'), 'decode', TEST_NOW)).toBeUndefined();
    t.apply({ op: 'DEL', key: outlierKey(keyOf('a'), 'aggregated') });
    expect(t.ejected(keyOf('a'), 'aggregated', TEST_NOW)).toBeUndefined();
    expect(t.size).toBe(3);
  });

  it('never ejects a whole pool, and honours the earliest ejections when over the ceiling', () => {
    const t = tableOf(
      record('a', 'aggregated', { ejectedAt: TEST_NOW - 300 }),
      record('b', 'aggregated', { ejectedAt: TEST_NOW - 900 }),
      record('c', 'aggregated', { ejectedAt: TEST_NOW - 600 }),
    );
    const keys = ['a', 'b', 'c', 'd'].map((p) => keyOf(p));
    const at = (i: number) => keys[i];
    const drop = (size: number, maxEjectionPercent: number) =>
      ejectionOf(t, 'aggregated', TEST_NOW, size, at, { maxEjectionPercent, panicThresholdPercent: 0 })?.drop;
    expect(drop(4, 50)).toEqual([1, 2]);
    expect(drop(4, 100)).toEqual([1, 2, 0]);
    expect(drop(3, 100)).toEqual([1, 2]);
    expect(drop(1, 100)).toEqual([]);
    expect(drop(4, 0)).toEqual([]);
    expect(
      ejectionOf(t, 'aggregated', TEST_NOW, 4, (i) => `other-${i}`, { maxEjectionPercent: 50, panicThresholdPercent: 0 }),
    ).toBeUndefined();
  });

  it('ignores ejection below the panic threshold (Envoy healthy_panic_threshold), and says when all are ejected', () => {
    const t = tableOf(record('a', 'aggregated', { ejectedAt: TEST_NOW - 300 }), record('b', 'aggregated', { ejectedAt: TEST_NOW - 900 }));
    const keys = ['a', 'b', 'c', 'd'].map((p) => keyOf(p));
    const at = (i: number) => keys[i];
    const policy = { maxEjectionPercent: 100, panicThresholdPercent: 50 };
    // 2 of 4 healthy = 50 %: not below the threshold, both ejections hold (least recently failed first).
    expect(ejectionOf(t, 'aggregated', TEST_NOW, 4, at, policy)).toEqual({ drop: [1, 0], all: false, panic: false });
    // 1 of 3 healthy = 33 %: panic, every candidate is ranked.
    expect(ejectionOf(t, 'aggregated', TEST_NOW, 3, at, policy)).toEqual({ drop: [], all: false, panic: true });
    // 0 of 2 healthy: panic and the whole stage is ejected.
    expect(ejectionOf(t, 'aggregated', TEST_NOW, 2, at, policy)).toEqual({ drop: [], all: true, panic: true });
    // Without a panic threshold the ceiling still keeps one in.
    expect(ejectionOf(t, 'aggregated', TEST_NOW, 2, at, { maxEjectionPercent: 100, panicThresholdPercent: 0 })).toEqual({
      drop: [1],
      all: true,
      panic: false,
    });
  });
});

describe('Scheduler with shared outlier state', () => {
  const aggregated = () =>
    buildIndex([
      { pod: 'a', kv: 0.0 },
      { pod: 'b', kv: 0.5 },
      { pod: 'c', kv: 0.9 },
    ]);

  it('moves an ejected endpoint behind the healthy ones (a last-resort alternate) and says so in the explanation', () => {
    const s = new Scheduler({ index: aggregated(), tracker: new InflightTracker(), outliers: tableOf(record('a', 'aggregated')) });
    const d = decide(s, { explain: true });
    const pods = d.attempts.map((x) => podOf(x.endpoint.key));
    expect(pods.slice(0, 2).sort()).toEqual(['b', 'c']);
    expect(pods[2]).toBe('a');
    const profile = d.explanation?.profiles[0];
    expect(profile?.endpoints.find((e) => e.key === keyOf('a'))?.filteredBy).toBe('outlier-ejection');
  });

  it('offers a half-open endpoint again, and ignores ejections from another stage', () => {
    const expired = new Scheduler({
      index: aggregated(),
      tracker: new InflightTracker(),
      outliers: tableOf(record('a', 'aggregated', { ejectedUntil: TEST_NOW - 1 })),
    });
    expect(podOf(decide(expired).attempts[0]?.endpoint.key ?? '')).toBe('a');
    const otherStage = new Scheduler({ index: aggregated(), tracker: new InflightTracker(), outliers: tableOf(record('a', 'prefill')) });
    expect(podOf(decide(otherStage).attempts[0]?.endpoint.key ?? '')).toBe('a');
  });

  it('keeps the pool served when every endpoint is ejected (panic), and honours consecutiveErrors: 0 (off)', () => {
    const all = tableOf(
      record('a', 'aggregated', { ejectedAt: TEST_NOW - 3 }),
      record('b', 'aggregated', { ejectedAt: TEST_NOW - 2 }),
      record('c', 'aggregated', { ejectedAt: TEST_NOW - 1 }),
    );
    const s = new Scheduler({ index: aggregated(), tracker: new InflightTracker(), outliers: all });
    // 0 of 3 healthy is below the panic threshold (50 %): ejection is ignored, every pod is ranked and tried.
    expect(
      decide(s)
        .attempts.map((x) => podOf(x.endpoint.key))
        .sort(),
    ).toEqual(['a', 'b', 'c']);
    // Without panic (threshold 0) the ceiling (50 % of 3 is 1) keeps the earliest ejection (a) out of the ranking,
    // and a still comes last, as the last resort.
    const noPanic = modelServerRecord();
    const noPanicIndex = buildIndex(
      [
        { pod: 'a', kv: 0.0 },
        { pod: 'b', kv: 0.5 },
        { pod: 'c', kv: 0.9 },
      ],
      [{ ...noPanic, spec: { ...noPanic.spec, trafficPolicy: { outlierDetection: { panicThreshold: 0 } } } }],
    );
    const ceiling = new Scheduler({ index: noPanicIndex, tracker: new InflightTracker(), outliers: all });
    const pods = decide(ceiling).attempts.map((x) => podOf(x.endpoint.key));
    expect(pods.slice(0, 2).sort()).toEqual(['b', 'c']);
    expect(pods[2]).toBe('a');
    const off = modelServerRecord();
    const offIndex = buildIndex(
      [
        { pod: 'a', kv: 0.0 },
        { pod: 'b', kv: 0.5 },
      ],
      [
        {
          ...off,
          spec: { ...off.spec, trafficPolicy: { outlierDetection: { consecutiveErrors: 0 } } },
        },
      ],
    );
    const noDetection = new Scheduler({ index: offIndex, tracker: new InflightTracker(), outliers: tableOf(record('a', 'aggregated')) });
    expect(podOf(decide(noDetection).attempts[0]?.endpoint.key ?? '')).toBe('a');
  });

  it('pd: an ejected prefill pairs only after the healthy one', () => {
    const index = buildIndex(
      [
        { pod: 'd1', role: 'decode', group: 'g1' },
        { pod: 'pa', role: 'prefill', group: 'g1', kv: 0.1 },
        { pod: 'pb', role: 'prefill', group: 'g1', kv: 0.2 },
      ],
      [modelServerRecord({ mode: 'pd' })],
    );
    const s = new Scheduler({
      index,
      tracker: new InflightTracker(),
      outliers: tableOf(record('pa', 'prefill')),
    });
    const d = decide(s);
    expect(d.attempts.map((x) => podOf(x.prefill?.key ?? ''))).toEqual(['pb', 'pa']);
  });

  it('pd: with two decodes, every healthy pair comes before any pair with the ejected prefill', () => {
    const index = buildIndex(
      [
        { pod: 'd1', role: 'decode', group: 'g1', kv: 0.1 },
        { pod: 'd2', role: 'decode', group: 'g1', kv: 0.2 },
        { pod: 'pa', role: 'prefill', group: 'g1', kv: 0.1 },
        { pod: 'pb', role: 'prefill', group: 'g1', kv: 0.2 },
      ],
      [modelServerRecord({ mode: 'pd' })],
    );
    const s = new Scheduler({ index, tracker: new InflightTracker(), outliers: tableOf(record('pa', 'prefill')) });
    const pairs = decide(s).attempts.map((x) => `${podOf(x.endpoint.key)}+${podOf(x.prefill?.key ?? '')}`);
    // Both decodes get the healthy prefill first (a retry after a failing decode keeps a healthy prefill);
    // the ejected one is only a last resort.
    expect(pairs.slice(0, 2).sort()).toEqual(['d1+pb', 'd2+pb']);
    expect(pairs.slice(2).every((p) => p.endsWith('+pa'))).toBe(true);
    expect(pairs.length).toBeGreaterThan(2);
  });
});

describe('Scheduler: a stage with no usable endpoint falls back to the shortcut the engine supports', () => {
  const pd = (engine: 'vLLM' | 'SGLang', kv: 'nixl' | 'http' | undefined, withPrefills: boolean) => {
    const base = modelServerRecord({ mode: 'pd', engine });
    const spec = kv === undefined ? base.spec : { ...base.spec, kvConnector: { type: kv } };
    return buildIndex(
      [
        { pod: 'd1', role: 'decode', group: 'g1' },
        ...(withPrefills
          ? [
              { pod: 'pa', role: 'prefill' as const, group: 'g1' },
              { pod: 'pb', role: 'prefill' as const, group: 'g1' },
            ]
          : []),
      ],
      [{ ...base, spec }],
    );
  };
  const bothPrefillsEjected = () => tableOf(record('pa', 'prefill'), record('pb', 'prefill', { ejectedAt: TEST_NOW - 2000 }));

  it('vLLM PD (NIXL): every prefill ejected or none ready → the decode prefills itself, marked as a fallback', () => {
    const ejected = new Scheduler({ index: pd('vLLM', 'nixl', true), tracker: new InflightTracker(), outliers: bothPrefillsEjected() });
    const d = decide(ejected, { inputTokens: 4000 });
    expect(d.attempts.every((a) => a.prefill === undefined)).toBe(true);
    expect(d.disaggregation?.prefill).toBe('local');
    expect(d.disaggregation?.fallback).toEqual([{ stage: 'prefill', reason: 'all_ejected' }]);
    const none = new Scheduler({ index: pd('vLLM', 'nixl', false), tracker: new InflightTracker(), outliers: new OutlierTable() });
    expect(decide(none).disaggregation?.fallback).toEqual([{ stage: 'prefill', reason: 'none_ready' }]);
  });

  it('the prefill fallback answers from the decode ranking already made: the decode profile runs once', () => {
    const none = new Scheduler({ index: pd('vLLM', 'nixl', false), tracker: new InflightTracker(), outliers: new OutlierTable() });
    const d = decide(none, { explain: true });
    expect(d.disaggregation?.fallback).toEqual([{ stage: 'prefill', reason: 'none_ready' }]);
    expect(d.attempts).toEqual([{ endpoint: expect.objectContaining({ key: keyOf('d1') }) }]);
    const decodeRuns = d.explanation?.profiles.filter((p) => p.profile === 'decode') ?? [];
    expect(decodeRuns).toHaveLength(1);
    expect(decodeRuns[0]?.endpoints[0]?.key).toBe(keyOf('d1'));
    expect(decodeRuns[0]?.decider).toHaveLength(1);
  });

  it('a ModelServer update that changes its KV connector changes the shortcut at once (worked out per spec object)', () => {
    const index = pd('vLLM', 'nixl', false);
    const s = new Scheduler({ index, tracker: new InflightTracker(), outliers: new OutlierTable() });
    expect(decide(s).disaggregation?.fallback).toEqual([{ stage: 'prefill', reason: 'none_ready' }]);
    const base = modelServerRecord({ mode: 'pd' });
    index.applyModelServer({ op: 'PUT', value: { ...base, spec: { ...base.spec, kvConnector: { type: 'http' } } } });
    const err = s.schedule(schedulingRequest(), TEST_NOW);
    expect(err.ok).toBe(false);
    if (!err.ok) expect(err.message).toMatch(/no fallback: KV connector 'http'/);
  });

  it('a healthy prefill keeps the normal path (no fallback)', () => {
    const s = new Scheduler({
      index: pd('vLLM', 'nixl', true),
      tracker: new InflightTracker(),
      outliers: tableOf(record('pa', 'prefill')),
    });
    const d = decide(s, { inputTokens: 4000 });
    expect(podOf(d.attempts[0]?.prefill?.key ?? '')).toBe('pb');
    expect(d.disaggregation?.fallback).toBeUndefined();
  });

  it('vLLM PD over the plain http connector and SGLang PD have no shortcut: ejected prefills are still tried, none ready is a 503 naming the stage', () => {
    for (const [engine, kv] of [
      ['vLLM', 'http'],
      ['SGLang', undefined],
    ] as const) {
      const ejected = new Scheduler({ index: pd(engine, kv, true), tracker: new InflightTracker(), outliers: bothPrefillsEjected() });
      const d = decide(ejected, { inputTokens: 4000 });
      expect(d.attempts.map((a) => podOf(a.prefill?.key ?? '')).sort()).toEqual(['pa', 'pb']);
      expect(d.disaggregation?.fallback).toBeUndefined();
      const none = new Scheduler({ index: pd(engine, kv, false), tracker: new InflightTracker(), outliers: new OutlierTable() });
      const err = none.schedule(schedulingRequest(), TEST_NOW);
      expect(err.ok).toBe(false);
      if (!err.ok) {
        expect(err.code).toBe('SCHED_NO_PREFILL_PAIR');
        expect(err.message).toMatch(/prefill.*no fallback/);
      }
    }
  });

  const epd = (ec: 'shared-storage' | 'mooncake', withEncoders: boolean) => {
    const base = modelServerRecord({ mode: 'epd' });
    return buildIndex(
      [
        { pod: 'd1', role: 'decode', group: 'g1' },
        { pod: 'pa', role: 'prefill', group: 'g1' },
        ...(withEncoders
          ? [
              { pod: 'ea', role: 'encode' as const, group: 'g1' },
              { pod: 'eb', role: 'encode' as const, group: 'g1' },
            ]
          : []),
      ],
      [{ ...base, spec: { ...base.spec, ecConnector: { type: ec } } } as typeof base],
    );
  };
  const image = { mediaItems: [{ index: 0, key: 'img-1', modality: 'image' as const }], inputTokens: 4000 };

  it('vLLM EPD (shared-storage EC): every encoder ejected or none ready → the prefill encodes itself', () => {
    const ejected = new Scheduler({
      index: epd('shared-storage', true),
      tracker: new InflightTracker(),
      outliers: tableOf(record('ea', 'encode'), record('eb', 'encode')),
    });
    const d = decide(ejected, image);
    expect(d.encoders).toEqual([]);
    expect(d.disaggregation?.encode).toBe('local');
    expect(d.disaggregation?.fallback).toEqual([{ stage: 'encode', reason: 'all_ejected' }]);
    expect(podOf(d.attempts[0]?.prefill?.key ?? '')).toBe('pa');
    const none = new Scheduler({ index: epd('shared-storage', false), tracker: new InflightTracker(), outliers: new OutlierTable() });
    expect(decide(none, image).disaggregation?.fallback).toEqual([{ stage: 'encode', reason: 'none_ready' }]);
  });

  it('vLLM EPD with the Mooncake EC connector has no shortcut: no encoder ready is a 503 naming the stage', () => {
    const none = new Scheduler({ index: epd('mooncake', false), tracker: new InflightTracker(), outliers: new OutlierTable() });
    const err = none.schedule(schedulingRequest(image), TEST_NOW);
    expect(err.ok).toBe(false);
    if (!err.ok) {
      expect(err.code).toBe('SCHED_NO_ENCODER');
      expect(err.message).toMatch(/encode.*no fallback: a Mooncake EC consumer/);
    }
  });
});
