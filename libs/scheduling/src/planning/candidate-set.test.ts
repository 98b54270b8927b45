import { InflightTracker } from '../state/inflight-tracker';
import { buildIndex, endpointRecord, keyOf } from '../testing';
import { TEST_NOW } from '../testing/clock';
import { CandidateSet } from './candidate-set';

const pods = ['a', 'b', 'c', 'd', 'e'];

function setup() {
  const index = buildIndex(pods.map((pod, i) => ({ pod, kv: i / 10, running: i })));
  const tracker = new InflightTracker();
  tracker.applyBatch({ v: 1, gateway: 'gw', seq: 0, events: [], inflight: { [keyOf('b')]: 2, [keyOf('d')]: 4 } }, TEST_NOW);
  const list = index.pool('default', 'ms')?.aggregated;
  if (!list) throw new Error('no list');
  return { index, tracker, list, set: new CandidateSet(index, tracker) };
}

const podsOf = (set: CandidateSet): string[] => Array.from({ length: set.size }, (_, i) => set.endpoint(i).record.pod);
const mask = (bits: number[]): Uint8Array => Uint8Array.from(bits);

describe('CandidateSet', () => {
  it('reads a list in place, and follows metric updates of its endpoints', () => {
    const { index, list, set } = setup();
    set.reset(list);
    expect(set.size).toBe(5);
    expect(set.running).toBe(list.columns.running);
    index.applyEndpoint({ op: 'PUT', value: endpointRecord({ pod: 'c', kv: 0.99, running: 42 }) });
    set.reset(list);
    const c = set.indexOf(keyOf('c'));
    expect([set.kvCacheUsage[c], set.running[c]]).toEqual([0.99, 42]);
  });

  it('compacts only when something was removed, keeping columns, endpoints and positions aligned', () => {
    const { list, set } = setup();
    set.reset(list);
    expect(set.compact(mask([1, 1, 1, 1, 1]))).toBe(false);
    expect(set.running).toBe(list.columns.running);
    expect(set.compact(mask([1, 0, 1, 0, 1]))).toBe(true);
    expect(podsOf(set)).toEqual(['a', 'c', 'e']);
    expect([...set.running.subarray(0, 3)]).toEqual([0, 2, 4]);
    expect([keyOf('a'), keyOf('b'), keyOf('e'), keyOf('zzz')].map((k) => set.indexOf(k))).toEqual([0, -1, 2, -1]);
    set.compact(mask([0, 1, 1]));
    expect(podsOf(set)).toEqual(['c', 'e']);
    expect([set.indexOf(keyOf('c')), set.indexOf(keyOf('e')), set.indexOf(keyOf('a'))]).toEqual([0, 1, -1]);
  });

  it('does not answer positions for endpoints of another list', () => {
    const { index, list, set } = setup();
    index.applyEndpoint({ op: 'PUT', value: endpointRecord({ pod: 'x', modelServer: 'other' }) });
    set.reset(list);
    expect(set.indexOf('default.other.x')).toBe(-1);
  });

  it('gathers endpoints of several lists and answers positions by key', () => {
    const { index, set } = setup();
    set.reset(['e', 'a'].map((p) => index.getIndexed(keyOf(p))!));
    expect(podsOf(set)).toEqual(['e', 'a']);
    expect([set.indexOf(keyOf('a')), set.indexOf(keyOf('b'))]).toEqual([1, -1]);
    expect([...set.kvCacheUsage.subarray(0, 2)]).toEqual([0.4, 0]);
  });

  it('computes in-flight counts once and keeps them aligned through compaction', () => {
    const { list, set } = setup();
    set.reset(list);
    const byPod = (s: CandidateSet) => Object.fromEntries(podsOf(s).map((p, i) => [p, s.inflight()[i]]));
    expect(byPod(set)).toEqual({ a: 0, b: 2, c: 0, d: 4, e: 0 });
    set.compact(mask([0, 1, 0, 1, 1]));
    expect(byPod(set)).toEqual({ b: 2, d: 4, e: 0 });
  });
});
