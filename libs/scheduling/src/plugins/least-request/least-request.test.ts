import { InflightTracker } from '../../state/inflight-tracker';
import { applyFilter, applyScorer, buildIndex, candidatesOf, endpointRecord, keyOf, pluginContext } from '../../testing';
import { TEST_NOW } from '../../testing/clock';
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
    const peak = new LeastRequestPlugin('least-request', { maxWaitingRequests: 10, queueEstimate: 'peak-running' });
    /** One index whose records the scrapes replace (an endpoint keeps the most it has been seen running). */
    function pool(pods: string[]) {
      const index = buildIndex(pods.map((pod) => ({ pod })));
      return {
        index,
        scrape: (pod: string, running: number, waiting = 0) =>
          index.applyEndpoint({ op: 'PUT', value: endpointRecord({ pod, running, waiting }) }),
        scores: (plugin: LeastRequestPlugin, inflight: Record<string, number>) => {
          const tracker = new InflightTracker();
          tracker.applyBatch(
            {
              v: 1,
              gateway: 'gw',
              seq: 0,
              events: [],
              inflight: Object.fromEntries(Object.entries(inflight).map(([p, n]) => [keyOf(p), n])),
            },
            TEST_NOW,
          );
          return applyScorer(plugin, pluginContext(), candidatesOf(index, pods, tracker));
        },
      };
    }

    it('counts requests dispatched since the scrape as running while the engine has been seen running more', () => {
      const p = pool(['a', 'b']);
      p.scrape('a', 8);
      p.scrape('b', 8);
      // Later: a's last scrape says 4 running and 3 requests went to it since. Kthena's estimate calls those 3 queued
      // (base 7 + 300); within the 8 a has been seen running, they run (base 7).
      p.scrape('a', 4);
      p.scrape('b', 6);
      expect(p.scores(plugin, { a: 7, b: 6 })).toEqual([0, (301 / 307) * 100]);
      expect(p.scores(peak, { a: 7, b: 6 })).toEqual([0, (1 / 7) * 100]);
    });

    it('takes the scraped running count as the capacity when the engine reported waiting requests', () => {
      const p = pool(['a', 'b']);
      p.scrape('a', 16);
      // Out of KV at 5 running: 3 waiting, so 7 in flight means 2 queued, whatever a once ran.
      p.scrape('a', 5, 3);
      p.scrape('b', 1);
      expect(p.scores(peak, { a: 7, b: 1 })).toEqual([0, (206 / 207) * 100]);
    });

    it('starts a new endpoint from its own scrapes', () => {
      const p = pool(['a', 'b']);
      p.scrape('a', 16);
      p.scrape('a', 1);
      p.scrape('b', 5);
      expect(p.scores(peak, { a: 3, b: 5 })[0]).toBeCloseTo(40, 9);
      p.index.applyEndpoint({ op: 'DEL', key: keyOf('a') });
      p.scrape('a', 1);
      expect(p.scores(peak, { a: 3, b: 5 })[0]).toBe(0); // base 3 + 200: the new a has only been seen running 1
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
