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
  const plugin = new LeastRequestPlugin('least-request', { maxWaitingRequests: 10, queueEstimate: 'running' });

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

  describe('queueEstimate peak-running', () => {
    it('counts requests dispatched since the scrape as running while the engine has been seen running more', () => {
      const peak = new LeastRequestPlugin('least-request', { maxWaitingRequests: 10, queueEstimate: 'peak-running' });
      // The first scrape saw both engines running 8.
      applyScorer(
        peak,
        pluginContext(),
        setup([
          { pod: 'a', inflight: 8, running: 8 },
          { pod: 'b', inflight: 8, running: 8 },
        ]),
      );
      // Later: a's last scrape says 4 running, and 3 requests went to it since. Kthena's estimate calls those 3 queued
      // (base 7 + 300); within the 8 a has run, they are running (base 7).
      const later = [
        { pod: 'a', inflight: 7, running: 4 },
        { pod: 'b', inflight: 6, running: 6 },
      ];
      expect(applyScorer(plugin, pluginContext(), setup(later))).toEqual([0, (301 / 307) * 100]);
      const [a, b] = applyScorer(peak, pluginContext(), setup(later));
      expect(b).toBeGreaterThan(a);
      expect(a).toBeCloseTo(0, 9); // still the busier one, but by one request, not by three queued ones
      expect(applyScorer(peak, pluginContext(), setup([...later, { pod: 'c', inflight: 20, running: 8 }]))[0]).toBeGreaterThan(90);
    });

    it('takes the scraped running count as the capacity when the engine reported waiting requests', () => {
      const peak = new LeastRequestPlugin('least-request', { maxWaitingRequests: 10, queueEstimate: 'peak-running' });
      applyScorer(
        peak,
        pluginContext(),
        setup([
          { pod: 'a', inflight: 16, running: 16 },
          { pod: 'b', inflight: 0, running: 0 },
        ]),
      );
      // Out of KV at 5 running: 3 waiting, so 7 in flight means 2 queued, whatever a once ran.
      const scores = applyScorer(
        peak,
        pluginContext(),
        setup([
          { pod: 'a', inflight: 7, running: 5, waiting: 3 },
          { pod: 'b', inflight: 0, running: 0 },
        ]),
      );
      expect(scores).toEqual([0, 100]);
    });

    it('forgets a removed endpoint (a new pod under the same key starts from its own counts)', () => {
      const peak = new LeastRequestPlugin('least-request', { maxWaitingRequests: 10, queueEstimate: 'peak-running' });
      applyScorer(
        peak,
        pluginContext(),
        setup([
          { pod: 'a', inflight: 16, running: 16 },
          { pod: 'b', inflight: 1, running: 1 },
        ]),
      );
      const after = [
        { pod: 'a', inflight: 3, running: 1 },
        { pod: 'b', inflight: 5, running: 5 },
      ];
      expect(applyScorer(peak, pluginContext(), setup(after))[0]).toBeGreaterThan(0);
      peak.endpointRemoved(keyOf('a'));
      expect(applyScorer(peak, pluginContext(), setup(after))[0]).toBe(0);
    });
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
