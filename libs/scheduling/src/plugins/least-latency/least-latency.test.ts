import { createInTreeRegistry } from '../in-tree';
import { loadSchedulerConfig } from '../../config/load-config';
import { Scheduler } from '../../scheduler';
import { InflightTracker } from '../../state/inflight-tracker';
import {
  applyScorer,
  buildIndex,
  candidatesOf,
  endpointRecord,
  keyOf,
  pluginContext,
  schedulingRequest,
  type EndpointSpec,
} from '../../testing';
import { TEST_NOW } from '../../testing/clock';
import { LeastLatencyScorer } from './least-latency';

const pods: EndpointSpec[] = [
  { pod: 'a', ttftMs: 100, tpotMs: 10 },
  { pod: 'b', ttftMs: 200, tpotMs: 30 },
  { pod: 'c', ttftMs: 300, tpotMs: 20 },
  { pod: 'new' },
  { pod: 'zero', ttftMs: 0, tpotMs: 15 },
];

/** Scores at the time the latency was observed (age 0, full weight), unless `now` says otherwise. */
function scores(
  alpha: number,
  specs: EndpointSpec[] = pods,
  now = TEST_NOW - 500,
  tracker?: InflightTracker,
  normalization: 'min-max' | 'relative' = 'min-max',
): number[] {
  const c = candidatesOf(
    buildIndex(specs),
    specs.map((p) => p.pod),
    tracker,
  );
  return applyScorer(
    new LeastLatencyScorer('least-latency', { TTFTTPOTWeightFactor: alpha, maxLatencyAgeMs: 30_000, normalization }),
    pluginContext({ now }),
    c,
  );
}

describe('least-latency', () => {
  // sTTFT over {100,200,300} = 100, 50, 0; sTPOT over {10,30,20} = 100, 0, 50; no data → 50.
  it.each([
    { alpha: 0.5, expected: [100, 25, 25, 50, 50] },
    { alpha: 1, expected: [100, 50, 0, 50, 50] },
    { alpha: 0, expected: [100, 0, 50, 50, 50] },
    { alpha: 0.25, expected: [100, 12.5, 37.5, 50, 50] },
  ])('α=$alpha', ({ alpha, expected }) => {
    scores(alpha).forEach((v, i) => expect(v).toBeCloseTo(expected[i], 9));
  });

  it('relative: scores each endpoint by the fastest one over its own latency, not by its rank between min and max', () => {
    // sTTFT = 100·100/{100,200,300} = 100, 50, 33.3; sTPOT = 100·10/{10,30,20} = 100, 33.3, 50; no data → 50.
    const expected = [100, (50 + 100 / 3) / 2, (100 / 3 + 50) / 2, 50, 50];
    scores(0.5, pods, TEST_NOW - 500, undefined, 'relative').forEach((v, i) => expect(v).toBeCloseTo(expected[i], 9));
  });

  it('relative: endpoints a few per cent apart score a few points apart (min-max puts them 100 apart)', () => {
    const close: EndpointSpec[] = [
      { pod: 'a', ttftMs: 100, tpotMs: 20 },
      { pod: 'b', ttftMs: 105, tpotMs: 21 },
    ];
    const [a, b] = scores(0.5, close, TEST_NOW - 500, undefined, 'relative');
    expect(a).toBe(100);
    expect(a - b).toBeLessThan(5);
    expect(scores(0.5, close)).toEqual([100, 0]);
  });

  it('gives 100 when every measured endpoint has the same latency (max = min)', () => {
    expect(scores(0.5, [{ pod: 'a', ttftMs: 80, tpotMs: 8 }, { pod: 'b', ttftMs: 80, tpotMs: 8 }, { pod: 'c' }])).toEqual([100, 100, 50]);
  });

  it('fades a mean towards 50 as it ages, and probes an idle endpoint whose mean aged out', () => {
    const specs: EndpointSpec[] = [
      { pod: 'fast', ttftMs: 100, tpotMs: 10, latencyAt: TEST_NOW },
      { pod: 'slow', ttftMs: 9000, tpotMs: 90, latencyAt: TEST_NOW - 15_000 },
      { pod: 'old', ttftMs: 9000, tpotMs: 90, latencyAt: TEST_NOW - 40_000 },
      { pod: 'old-busy', ttftMs: 9000, tpotMs: 90, latencyAt: TEST_NOW - 40_000 },
    ];
    const tracker = new InflightTracker();
    tracker.applyEvent('gw', { type: 'start', requestId: 'r', endpoint: keyOf('old-busy'), stage: 'aggregated', at: TEST_NOW });
    // slow: half-aged (w = 0.5) worst of the fresh ones: 0.5·0 + 0.5·50; old: aged out and idle, probed.
    expect(scores(0.5, specs, TEST_NOW, tracker)).toEqual([100, 25, 100, 50]);
  });

  it('reproduces and ends the starvation of a recovered engine: an engine shunned after one slow burst is probed back', () => {
    // Three engines, 20 requests/s; an engine's mean moves only when it served something in the last second (as the
    // pod-watcher's interval means do). Engine c had one slow burst (9 s) and has since recovered (100 ms).
    const served = (maxLatencyAgeMs: number): Record<string, number> => {
      const index = buildIndex(
        [
          { pod: 'a', ttftMs: 100, tpotMs: 10, latencyAt: TEST_NOW },
          { pod: 'b', ttftMs: 100, tpotMs: 10, latencyAt: TEST_NOW },
          { pod: 'c', ttftMs: 9000, tpotMs: 10, latencyAt: TEST_NOW },
        ].map((e) => ({ ...e, scrapedAt: TEST_NOW })),
      );
      const config = loadSchedulerConfig(
        { plugins: [{ type: 'least-latency', args: { maxLatencyAgeMs } }] },
        { registry: createInTreeRegistry() },
      );
      if (!config.ok) throw new Error(config.reasons.join('; '));
      const tracker = new InflightTracker();
      const s = new Scheduler({ index, tracker, config: config.loaded });
      const counts: Record<string, number> = { a: 0, b: 0, c: 0 };
      for (let second = 1; second <= 60; second++) {
        const now = TEST_NOW + second * 1000;
        const inSecond = new Set<string>();
        for (let r = 0; r < 20; r++) {
          const d = s.schedule(schedulingRequest({ id: `r-${second}-${r}` }), now);
          if (!d.ok) throw new Error(d.message);
          const pod = d.attempts[0].endpoint.pod;
          counts[pod] += 1;
          // The gateway runs it at once and it is short: started and finished before the next decision.
          const leg = { requestId: d.id, endpoint: keyOf(pod), stage: 'aggregated' as const, at: now };
          tracker.applyEvent('gw', { type: 'start', ...leg });
          tracker.applyEvent('gw', { type: 'finish', ...leg, ok: true });
          inSecond.add(pod);
        }
        // Every engine is scraped every second; only the ones that served something have a new mean.
        for (const pod of ['a', 'b', 'c']) {
          const m = index.get(keyOf(pod))!.record.metrics;
          const fresh = inSecond.has(pod);
          index.applyEndpoint({
            op: 'PUT',
            value: endpointRecord({
              pod,
              ttftMs: fresh ? 100 : m.ttftMs!,
              tpotMs: 10,
              latencyAt: fresh ? now : m.latencyAt!,
              scrapedAt: now,
            }),
          });
        }
      }
      return counts;
    };
    // Kthena's behaviour (means never age): c is scored 0 forever and never served again.
    expect(served(1e12).c).toBe(0);
    const fixed = served(30_000);
    expect(fixed.c).toBeGreaterThan(0);
    expect(fixed.c).toBeGreaterThanOrEqual(Math.min(fixed.a, fixed.b) / 3);
  });

  it.each([
    { value: '.nan', why: 'NaN' },
    { value: '.inf', why: 'Infinity' },
    { value: '-.inf', why: '-Infinity' },
    { value: '1.5', why: 'above 1' },
    { value: '-0.1', why: 'below 0' },
    { value: '"0.5"', why: 'a string' },
  ])('refuses TTFTTPOTWeightFactor $why at load', ({ value }) => {
    const yaml = `plugins:\n  - type: least-latency\n    args: {TTFTTPOTWeightFactor: ${value}}\n`;
    const result = loadSchedulerConfig(yaml, { registry: createInTreeRegistry() });
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.reasons.join('\n')).toMatch(/plugins\[0\]\.args\.TTFTTPOTWeightFactor/);
  });
});
