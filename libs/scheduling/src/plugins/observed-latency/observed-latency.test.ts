import type { DispatchEvent } from '@triad/bus';
import { InflightTracker } from '../../state/inflight-tracker';
import { applyScorer, buildIndex, candidatesOf, keyOf, pluginContext } from '../../testing';
import { TEST_NOW } from '../../testing/clock';
import { ObservedLatencyScorer } from './observed-latency';

const finish = (pod: string, at: number, ttftMs: number, tpotMs?: number): DispatchEvent => ({
  type: 'finish',
  requestId: `${pod}-${at}`,
  endpoint: keyOf(pod),
  stage: 'aggregated',
  at,
  ok: true,
  ttftMs,
  ...(tpotMs !== undefined ? { tpotMs } : {}),
});

function scores(tracker: InflightTracker, now: number, pods = ['a', 'b', 'c']): number[] {
  const c = candidatesOf(buildIndex(pods.map((pod) => ({ pod }))), pods, tracker);
  return applyScorer(
    new ObservedLatencyScorer('observed-latency', { TTFTTPOTWeightFactor: 0.5, maxLatencyAgeMs: 30_000, normalization: 'min-max' }),
    pluginContext({ now }),
    c,
  );
}

describe('observed-latency', () => {
  it('scores by the TTFT and TPOT the gateways measured (moving averages from finish events); no data is neutral', () => {
    const tracker = new InflightTracker();
    tracker.applyEvent('gw', finish('a', TEST_NOW, 100, 10));
    tracker.applyEvent('gw', finish('b', TEST_NOW, 300, 30));
    expect(scores(tracker, TEST_NOW)).toEqual([100, 0, 50]);
    // One slow answer moves a's average by 30 %, not all the way.
    tracker.applyEvent('gw', finish('a', TEST_NOW, 500, 10));
    expect(tracker.latency.get(keyOf('a'))?.ttftMs).toBeCloseTo(220, 9);
  });

  it("takes the figures from other gateways' dispatch batches too, snapshots included", () => {
    const tracker = new InflightTracker();
    tracker.applyBatch({ v: 1, gateway: 'gw-2', seq: 0, events: [finish('b', TEST_NOW, 50, 5)], inflight: {} }, TEST_NOW);
    tracker.applyBatch({ v: 1, gateway: 'gw-2', seq: 1, events: [finish('a', TEST_NOW, 150, 15)] }, TEST_NOW);
    expect(scores(tracker, TEST_NOW)).toEqual([0, 100, 50]);
  });

  it('ranks prefill pods, which have no TPOT, by TTFT alone', () => {
    const tracker = new InflightTracker();
    tracker.applyEvent('gw', finish('a', TEST_NOW, 400));
    tracker.applyEvent('gw', finish('b', TEST_NOW, 100));
    expect(scores(tracker, TEST_NOW, ['a', 'b'])).toEqual([50, 100]);
  });

  it("fades a slow pod's figure with age and probes it once it aged out while idle", () => {
    const tracker = new InflightTracker();
    tracker.applyEvent('gw', finish('a', TEST_NOW, 9000, 50));
    tracker.applyEvent('gw', finish('b', TEST_NOW, 100, 10));
    expect(scores(tracker, TEST_NOW, ['a', 'b'])[0]).toBe(0);
    expect(scores(tracker, TEST_NOW + 15_000, ['a', 'b'])[0]).toBeCloseTo(25, 9);
    expect(scores(tracker, TEST_NOW + 31_000, ['a', 'b'])[0]).toBe(100);
  });
});
