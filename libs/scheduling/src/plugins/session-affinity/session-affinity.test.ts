import { InflightTracker } from '../../state/inflight-tracker';
import { applyScorer, buildIndex, candidatesOf, keyOf, pluginContext, schedulingRequest } from '../../testing';
import { TEST_NOW } from '../../testing/clock';
import { SessionAffinityScorer } from './session-affinity';

const pods = ['a', 'b', 'c'];
const params = { loadFactor: 1.5, loadFloor: 0, batchRoom: true, maxSessions: 2 };

function score(plugin: SessionAffinityScorer, session: string | undefined, tracker = new InflightTracker()): number[] {
  const c = candidatesOf(buildIndex(pods.map((pod) => ({ pod }))), pods, tracker);
  const request = schedulingRequest(session === undefined ? {} : { session });
  return applyScorer(plugin, pluginContext({ request }), c);
}

describe('session-affinity', () => {
  it('scores 100 for the pod that served the session before, per stage, nothing without a session', () => {
    const plugin = new SessionAffinityScorer('session-affinity', params);
    plugin.postSchedule(pluginContext({ request: schedulingRequest({ session: 's1' }) }), { key: keyOf('b') } as never);
    plugin.learn({ model: 'm', endpoint: keyOf('c'), role: 'decode', prefixHashes: [], session: 's1' });
    expect(score(plugin, 's1')).toEqual([0, 100, 0]);
    expect(plugin.endpointOf('decode', 's1')).toBe(keyOf('c'));
    expect(score(plugin, 's2')).toEqual([0, 0, 0]);
    expect(score(plugin, undefined)).toEqual([0, 0, 0]);
  });

  it('lets go of the session pod past the load bound, and forgets the least recent sessions', () => {
    const plugin = new SessionAffinityScorer('session-affinity', params);
    plugin.learn({ model: 'm', endpoint: keyOf('a'), role: 'aggregated', prefixHashes: [], session: 's1' });
    const busy = new InflightTracker();
    for (let i = 0; i < 6; i++)
      busy.applyEvent('gw', { type: 'start', requestId: `r${i}`, endpoint: keyOf('a'), stage: 'aggregated', at: TEST_NOW });
    // 6 in flight on a, 0 elsewhere: cap = ceil(1.5 · 7 / 3) = 4.
    expect(score(plugin, 's1', busy)).toEqual([0, 0, 0]);
    plugin.learn({ model: 'm', endpoint: keyOf('b'), role: 'aggregated', prefixHashes: [], session: 's2' });
    plugin.learn({ model: 'm', endpoint: keyOf('c'), role: 'aggregated', prefixHashes: [], session: 's3' });
    expect(plugin.endpointOf('aggregated', 's1')).toBeUndefined();
    expect(score(plugin, 's3')).toEqual([0, 0, 100]);
  });
});
