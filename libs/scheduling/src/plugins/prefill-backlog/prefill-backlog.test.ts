import type { DispatchEvent } from '@triad/bus';
import { InflightTracker } from '../../state/inflight-tracker';
import { applyScorer, buildIndex, candidatesOf, keyOf, pluginContext } from '../../testing';
import { TEST_NOW } from '../../testing/clock';
import { PrefillBacklogScorer } from './prefill-backlog';

const start = (id: string, pod: string, at: number, inputTokens: number): DispatchEvent => ({
  type: 'start',
  requestId: id,
  endpoint: keyOf(pod),
  stage: 'aggregated',
  at,
  inputTokens,
});
const finish = (id: string, pod: string, at: number): DispatchEvent => ({
  type: 'finish',
  requestId: id,
  endpoint: keyOf(pod),
  stage: 'aggregated',
  at,
  ok: true,
});

const scorer = new PrefillBacklogScorer('prefill-backlog', { prefillMsPer1kTokens: 50, prefillOverheadMs: 0 });
function scores(tracker: InflightTracker, now: number, pods = ['a', 'b', 'c']): number[] {
  return applyScorer(scorer, pluginContext({ now }), candidatesOf(buildIndex(pods.map((pod) => ({ pod }))), pods, tracker));
}

describe('prefill-backlog', () => {
  it('scores every pod 100 while none has a prefill pending', () => {
    expect(scores(new InflightTracker(), TEST_NOW)).toEqual([100, 100, 100]);
  });

  it('prices in-flight prompt tokens, not requests: one 30k-token prompt outweighs ten short ones, until its prefill is done', () => {
    const tracker = new InflightTracker();
    tracker.applyEvent('gw', start('long', 'a', TEST_NOW, 30_000)); // 1,500 ms of prefill
    for (let i = 0; i < 10; i++) tracker.applyEvent('gw', start(`s${i}`, 'b', TEST_NOW, 300)); // 10 × 15 ms
    expect(scores(tracker, TEST_NOW)).toEqual([0, 90, 100]);
    // 1 s later a has 500 ms left and b's prompts are prefilled.
    expect(scores(tracker, TEST_NOW + 1000)).toEqual([0, 100, 100]);
    expect(scores(tracker, TEST_NOW + 1600)).toEqual([100, 100, 100]);
  });

  it("forgets a leg when it finishes, and a peer gateway's legs when its snapshot no longer counts the endpoint", () => {
    const tracker = new InflightTracker();
    tracker.applyEvent('gw', start('x', 'a', TEST_NOW, 20_000));
    tracker.applyEvent('gw', finish('x', 'a', TEST_NOW + 10));
    expect(scores(tracker, TEST_NOW + 20)[0]).toBe(100);
    tracker.applyBatch({ v: 1, gateway: 'peer', seq: 0, events: [start('y', 'b', TEST_NOW, 20_000)] }, TEST_NOW);
    expect(scores(tracker, TEST_NOW)[1]).toBe(0);
    tracker.applyBatch({ v: 1, gateway: 'peer', seq: 1, events: [], inflight: {} }, TEST_NOW);
    expect(scores(tracker, TEST_NOW)[1]).toBe(100);
  });
});
