import { InflightTracker } from '../../state/inflight-tracker';
import { applyFilter, applyScorer, buildIndex, candidatesOf, keyOf, pluginContext, TEST_NOW } from '../../testing';
import { LeastRequestPlugin } from './least-request';

function setup(pods: { pod: string; inflight: number; running: number; waiting?: number }[]) {
  const index = buildIndex(pods.map((p) => ({ pod: p.pod, running: p.running, waiting: p.waiting ?? 0 })));
  const tracker = new InflightTracker();
  const inflight = Object.fromEntries(pods.filter((p) => p.inflight > 0).map((p) => [keyOf(p.pod), p.inflight]));
  tracker.applyBatch({ v: 1, gateway: 'gw', seq: 0, events: [], inflight }, TEST_NOW);
  return candidatesOf(
    index,
    pods.map((p) => p.pod),
    tracker,
  );
}

describe('least-request', () => {
  const plugin = new LeastRequestPlugin('least-request', { maxWaitingRequests: 10 });

  it.each([
    {
      name: 'queued requests weigh 100x: base = inflight + 100·max(inflight − running, 0)',
      pods: [
        { pod: 'a', inflight: 0, running: 0 },
        { pod: 'b', inflight: 2, running: 2 },
        { pod: 'c', inflight: 5, running: 1 },
      ],
      // bases 0, 2, 405 → (405−b)/405·100
      expected: [100, (403 / 405) * 100, 0],
    },
    {
      name: 'maxBase 0 gives every endpoint 100',
      pods: [
        { pod: 'a', inflight: 0, running: 3 },
        { pod: 'b', inflight: 0, running: 0 },
      ],
      expected: [100, 100],
    },
    {
      name: 'running above in-flight does not go negative',
      pods: [
        { pod: 'a', inflight: 3, running: 3 },
        { pod: 'b', inflight: 3, running: 0 },
        { pod: 'c', inflight: 1, running: 8 },
      ],
      // bases 3, 303, 1 → (303−b)/303·100
      expected: [(300 / 303) * 100, 0, (302 / 303) * 100],
    },
  ])('scores: $name', ({ pods, expected }) => {
    const scores = applyScorer(plugin, pluginContext(), setup(pods));
    expected.forEach((v, i) => expect(scores[i]).toBeCloseTo(v, 9));
  });

  it('filters endpoints whose engine queue reached maxWaitingRequests', () => {
    const c = setup([
      { pod: 'a', inflight: 0, running: 0, waiting: 0 },
      { pod: 'b', inflight: 0, running: 0, waiting: 9 },
      { pod: 'c', inflight: 0, running: 0, waiting: 10 },
      { pod: 'd', inflight: 0, running: 0, waiting: 15 },
    ]);
    expect(applyFilter(plugin, pluginContext(), c)).toEqual(['a', 'b']);
  });
});
