import type { Decision, DecisionOrError } from '@triad/bus';
import { loadSchedulerConfig } from '../config/load-config';
import { createInTreeRegistry } from '../plugins/in-tree';
import { Scheduler } from '../scheduler';
import { InflightTracker } from '../state/inflight-tracker';
import { buildIndex, keyOf, modelServerRecord, schedulingRequest } from '../testing';
import { TEST_NOW } from '../testing/clock';
import { ONLY_CANDIDATE, TIE_BREAK, type PickVerdict } from './pick-verdict';

const IMAGE = { index: 0, key: 'u:cat', modality: 'image' as const };

/** encoder-cache (weight 3) and least-request (weight 1) over four pods; the observer keeps every verdict. */
function setup(pods = ['a', 'b', 'c', 'd']) {
  const loaded = loadSchedulerConfig(
    {
      plugins: [{ type: 'encoder-cache', args: { loadFactor: 1.25, loadFloor: 2 } }],
      profiles: { default: { filters: [], scorers: [{ plugin: 'encoder-cache', weight: 3 }, 'least-request'] } },
    },
    { registry: createInTreeRegistry() },
  );
  if (!loaded.ok) throw new Error(loaded.reasons.join('; '));
  const tracker = new InflightTracker();
  const verdicts: PickVerdict[][] = [];
  const scheduler = new Scheduler({
    index: buildIndex(pods.map((pod) => ({ pod }))),
    tracker,
    config: loaded.loaded,
    observer: { pluginTime: () => undefined, picked: (v) => verdicts.push([...v]) },
  });
  const inflight = (pod: string, n: number) => {
    for (let i = 0; i < n; i++)
      tracker.applyEvent('gw', { type: 'start', requestId: `${pod}-${i}`, endpoint: keyOf(pod), stage: 'aggregated', at: TEST_NOW });
  };
  return { scheduler, verdicts, inflight };
}

function ok(d: DecisionOrError): Decision {
  if (!d.ok) throw new Error(`${d.code}: ${d.message}`);
  return d;
}

describe('pick verdicts: which scorer decided, and affinity overruled by load', () => {
  it('names the affinity scorer when the image goes back to the pod that encoded it', () => {
    const { scheduler, verdicts } = setup();
    const first = ok(scheduler.schedule(schedulingRequest({ id: 'r1', mediaItems: [IMAGE] }), TEST_NOW));
    const again = ok(scheduler.schedule(schedulingRequest({ id: 'r2', mediaItems: [IMAGE], explain: true }), TEST_NOW));
    expect(again.attempts[0]?.endpoint.key).toBe(first.attempts[0]?.endpoint.key);
    expect(verdicts[1]).toEqual([{ profile: 'aggregated', decider: 'encoder-cache', overruled: [], affinity: ['encoder-cache'] }]);
    expect(again.explanation?.profiles[0]).toMatchObject({ decider: ['encoder-cache'] });
    expect(again.explanation?.profiles[0]).not.toHaveProperty('overruledByLoad');
  });

  it('counts the affinity as overruled when the holder is past the load bound and the pick goes elsewhere', () => {
    const { scheduler, verdicts, inflight } = setup();
    const holder = ok(scheduler.schedule(schedulingRequest({ id: 'r1', mediaItems: [IMAGE] }), TEST_NOW)).attempts[0]?.endpoint.key;
    const pod = holder.split('.')[2];
    // r1 counts on the holder until it starts (1), plus 3 started: cap = max(ceil(1.25 · 5 / 4), 2) = 2.
    inflight(pod, 3);
    const next = ok(scheduler.schedule(schedulingRequest({ id: 'r2', mediaItems: [IMAGE], explain: true }), TEST_NOW));
    expect(next.attempts[0]?.endpoint.key).not.toBe(holder);
    expect(verdicts[1]?.[0]?.overruled).toEqual(['encoder-cache']);
    expect(verdicts[1]?.[0]?.decider).not.toBe('encoder-cache');
    expect(next.explanation?.profiles[0]?.overruledByLoad).toEqual(['encoder-cache']);
  });

  it('says least-request decided a text request going to the idle pod, and tie-break among equals', () => {
    const { scheduler, verdicts, inflight } = setup(['a', 'b']);
    inflight('a', 1);
    expect(ok(scheduler.schedule(schedulingRequest({ id: 't1' }), TEST_NOW)).attempts[0]?.endpoint.key).toBe(keyOf('b'));
    expect(verdicts[0]).toEqual([{ profile: 'aggregated', decider: 'least-request', overruled: [], affinity: ['encoder-cache'] }]);
    // t1 counts on b until its leg starts: a and b are equal now.
    scheduler.schedule(schedulingRequest({ id: 't2' }), TEST_NOW);
    expect(verdicts[1]?.[0]?.decider).toBe(TIE_BREAK);
  });

  it('says only-candidate when one pod is left', () => {
    const { scheduler, verdicts } = setup(['a']);
    scheduler.schedule(schedulingRequest({ id: 'o1', mediaItems: [IMAGE] }), TEST_NOW);
    expect(verdicts[0]?.[0]?.decider).toBe(ONLY_CANDIDATE);
  });

  it('judges only the decisions the observer samples, and every decision that asks for an explanation', () => {
    const verdicts: PickVerdict[][] = [];
    const asked: string[] = [];
    const scheduler = new Scheduler({
      index: buildIndex(['a', 'b'].map((pod) => ({ pod }))),
      tracker: new InflightTracker(),
      observer: {
        pluginTime: () => undefined,
        picked: (v) => verdicts.push([...v]),
        judges: (request) => {
          asked.push(request.id);
          return request.id.startsWith('sampled');
        },
      },
    });
    ok(scheduler.schedule(schedulingRequest({ id: 'skipped-1' }), TEST_NOW));
    expect(verdicts).toEqual([]);
    ok(scheduler.schedule(schedulingRequest({ id: 'sampled-1' }), TEST_NOW));
    expect(verdicts).toHaveLength(1);
    expect(verdicts[0]?.[0]?.profile).toBe('aggregated');
    // Not sampled, but explained: the explanation still says who decided; the metrics see no extra verdict.
    const explained = ok(scheduler.schedule(schedulingRequest({ id: 'skipped-2', explain: true }), TEST_NOW));
    expect(explained.explanation?.profiles[0]?.decider).toHaveLength(1);
    expect(verdicts).toHaveLength(1);
    expect(asked).toEqual(['skipped-1', 'sampled-1', 'skipped-2']);
  });

  it('pd: judges the decode pick and the prefill pick of the chosen group, not the other groups the alternates use', () => {
    const verdicts: PickVerdict[][] = [];
    const scheduler = new Scheduler({
      index: buildIndex(
        [
          { pod: 'd1', role: 'decode', group: 'g1', running: 0 },
          { pod: 'd2', role: 'decode', group: 'g2', running: 3 },
          { pod: 'p1', role: 'prefill', group: 'g1' },
          { pod: 'p2', role: 'prefill', group: 'g2' },
        ],
        [modelServerRecord({ mode: 'pd' })],
      ),
      tracker: new InflightTracker(),
      observer: { pluginTime: () => undefined, picked: (v) => verdicts.push([...v]) },
    });
    const d = ok(scheduler.schedule(schedulingRequest({ id: 'pd-1', explain: true }), TEST_NOW));
    const chosenGroup = d.attempts[0]?.prefill?.key === keyOf('p1') ? 'g1' : 'g2';
    // Both groups were ranked (the alternates pair with the other group's prefill)...
    expect(d.attempts.map((a) => a.prefill?.key).sort()).toEqual([keyOf('p1'), keyOf('p2')]);
    const prefillRuns = d.explanation?.profiles.filter((p) => p.profile === 'prefill') ?? [];
    expect(prefillRuns.map((p) => p.group).sort()).toEqual(['g1', 'g2']);
    // ...but only the chosen group's pick was judged.
    expect(prefillRuns.filter((p) => p.decider !== undefined).map((p) => p.group)).toEqual([chosenGroup]);
    expect(verdicts).toHaveLength(1);
    expect(verdicts[0]?.map((v) => v.profile)).toEqual(['decode', 'prefill']);
  });
});
