import type { Decision, DecisionOrError, OutlierRecord, SchedulingRequestInput, Stage } from '@triad/bus';
import { outlierKey } from '@triad/bus';
import { Scheduler } from '../scheduler';
import { buildIndex, keyOf, modelServerRecord, schedulingRequest, TEST_NOW } from '../testing';
import { InflightTracker } from './inflight-tracker';
import { OutlierTable, ejectedPositions } from './outlier-table';

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

const podOf = (key: string): string => key.split('.')[2] as string;

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
    const at = (i: number) => keys[i] as string;
    expect(ejectedPositions(t, 'aggregated', TEST_NOW, 4, at, 50)).toEqual([1, 2]);
    expect(ejectedPositions(t, 'aggregated', TEST_NOW, 4, at, 100)).toEqual([0, 1, 2]);
    expect(ejectedPositions(t, 'aggregated', TEST_NOW, 3, at, 100)).toEqual([1, 2]);
    expect(ejectedPositions(t, 'aggregated', TEST_NOW, 1, at, 100)).toBeUndefined();
    expect(ejectedPositions(t, 'aggregated', TEST_NOW, 4, at, 0)).toBeUndefined();
  });
});

describe('Scheduler with shared outlier state', () => {
  const aggregated = () =>
    buildIndex([
      { pod: 'a', kv: 0.0 },
      { pod: 'b', kv: 0.5 },
      { pod: 'c', kv: 0.9 },
    ]);

  function decide(s: Scheduler, req: Partial<SchedulingRequestInput> = {}): Decision {
    return ok(s.schedule(schedulingRequest(req), TEST_NOW));
  }

  it('leaves an ejected endpoint out of the attempts and says so in the explanation', () => {
    const s = new Scheduler({ index: aggregated(), tracker: new InflightTracker(), outliers: tableOf(record('a', 'aggregated')) });
    const d = decide(s, { explain: true });
    expect(d.attempts.map((x) => podOf(x.endpoint.key))).not.toContain('a');
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

  it('keeps the pool served when every endpoint is ejected (ceiling), and honours consecutiveErrors: 0 (off)', () => {
    const all = tableOf(
      record('a', 'aggregated', { ejectedAt: TEST_NOW - 3 }),
      record('b', 'aggregated', { ejectedAt: TEST_NOW - 2 }),
      record('c', 'aggregated', { ejectedAt: TEST_NOW - 1 }),
    );
    const s = new Scheduler({ index: aggregated(), tracker: new InflightTracker(), outliers: all });
    // 50% of 3 is 1: only the earliest ejection (a) is honoured.
    expect(
      decide(s)
        .attempts.map((x) => podOf(x.endpoint.key))
        .sort(),
    ).toEqual(['b', 'c']);
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
        } as typeof off,
      ],
    );
    const noDetection = new Scheduler({ index: offIndex, tracker: new InflightTracker(), outliers: tableOf(record('a', 'aggregated')) });
    expect(podOf(decide(noDetection).attempts[0]?.endpoint.key ?? '')).toBe('a');
  });

  it('pd: an ejected prefill is left out of every pair', () => {
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
    expect(d.attempts.map((x) => podOf(x.prefill?.key ?? ''))).toEqual(['pb']);
  });
});
