import { InflightTracker } from '../../state/inflight-tracker';
import { applyScorer, buildIndex, candidatesOf, endpointRecord, keyOf, pluginContext, schedulingRequest } from '../../testing';
import { TEST_NOW } from '../../testing/clock';
import { EncoderCacheScorer } from './encoder-cache';

const pods = ['a', 'b', 'c', 'd'];
const params = { loadFactor: 1.25, loadFloor: 0, batchRoom: true, maxItemsPerEndpoint: 2, homeShare: 0, weighByHolders: false };
const items = (...keys: string[]) => keys.map((key, index) => ({ index, key, modality: 'image' as const }));

function score(
  plugin: EncoderCacheScorer,
  keys: string[],
  tracker = new InflightTracker(),
  index = buildIndex(pods.map((pod) => ({ pod }))),
): number[] {
  const c = candidatesOf(index, pods, tracker);
  return applyScorer(plugin, pluginContext({ request: schedulingRequest({ mediaItems: items(...keys) }) }), c);
}

describe('encoder-cache', () => {
  it("scores the share of the request's media items each pod was recently sent", () => {
    const plugin = new EncoderCacheScorer('encoder-cache', params);
    plugin.postSchedule(pluginContext({ request: schedulingRequest({ mediaItems: items('x', 'y') }) }), { key: keyOf('a') } as never);
    plugin.learn({ model: 'm', endpoint: keyOf('b'), role: 'prefill', prefixHashes: [], mediaKeys: ['y'] });
    plugin.learn({ model: 'm', endpoint: keyOf('c'), role: 'encode', prefixHashes: [], mediaKeys: ['x'] });
    expect(score(plugin, ['x', 'y'])).toEqual([100, 50, 0, 0]);
    expect(score(plugin, [])).toEqual([0, 0, 0, 0]);
  });

  it('weighs an item by how few pods hold it: the pod with the rarer item wins a split, one with every item wins outright', () => {
    const plugin = new EncoderCacheScorer('encoder-cache', { ...params, maxItemsPerEndpoint: 4, weighByHolders: true });
    for (const pod of ['a', 'b', 'c'])
      plugin.learn({ model: 'm', endpoint: keyOf(pod), role: 'aggregated', prefixHashes: [], mediaKeys: ['hot'] });
    plugin.learn({ model: 'm', endpoint: keyOf('d'), role: 'aggregated', prefixHashes: [], mediaKeys: ['rare'] });
    // hot: 3 of 4 pods hold it, worth 2 − 3/4; rare: 1 of 4, worth 2 − 1/4. No pod holds both.
    const split = score(plugin, ['hot', 'rare']);
    expect(split[3]).toBeCloseTo((100 * 1.75) / 3);
    for (const s of split.slice(0, 3)) expect(s).toBeCloseTo((100 * 1.25) / 3);
    // With equal shares the four pods tie, and load decides which image is encoded again.
    const equal = new EncoderCacheScorer('equal', { ...params, maxItemsPerEndpoint: 4 });
    for (const pod of ['a', 'b', 'c'])
      equal.learn({ model: 'm', endpoint: keyOf(pod), role: 'aggregated', prefixHashes: [], mediaKeys: ['hot'] });
    equal.learn({ model: 'm', endpoint: keyOf('d'), role: 'aggregated', prefixHashes: [], mediaKeys: ['rare'] });
    expect(score(equal, ['hot', 'rare'])).toEqual([50, 50, 50, 50]);
    // Once d holds both, it scores 100 and the pods with only the widely held image fall further behind.
    plugin.learn({ model: 'm', endpoint: keyOf('d'), role: 'aggregated', prefixHashes: [], mediaKeys: ['hot'] });
    const both = score(plugin, ['hot', 'rare']);
    expect(both[3]).toBeCloseTo(100);
    for (const s of both.slice(0, 3)) expect(s).toBeCloseTo(100 / 2.75);
    // One item: every holder gets the whole score, however many hold it.
    expect(score(plugin, ['hot'])).toEqual([100, 100, 100, 100]);
  });

  it('scores each call on its own items alone (its buffers are reused from call to call)', () => {
    const taught = () => {
      const plugin = new EncoderCacheScorer('encoder-cache', { ...params, maxItemsPerEndpoint: 4, weighByHolders: true });
      for (const pod of ['a', 'b'])
        plugin.learn({ model: 'm', endpoint: keyOf(pod), role: 'aggregated', prefixHashes: [], mediaKeys: ['hot'] });
      plugin.learn({ model: 'm', endpoint: keyOf('c'), role: 'aggregated', prefixHashes: [], mediaKeys: ['rare'] });
      return plugin;
    };
    const reused = taught();
    // hot: 2 of 4 (worth 1.5), rare: 1 of 4 (1.75), new: none (2 − 1/4 = 1.75); total 5.
    const three = score(reused, ['hot', 'rare', 'new']);
    expect(three[0]).toBeCloseTo(30);
    expect(three[1]).toBeCloseTo(30);
    expect(three[2]).toBeCloseTo(35);
    expect(three[3]).toBe(0);
    expect(score(reused, ['rare'])).toEqual(score(taught(), ['rare']));
    expect(score(reused, ['hot'])).toEqual([100, 100, 0, 0]);
  });

  it('forgets the least recent items per pod, and removed pods', () => {
    const plugin = new EncoderCacheScorer('encoder-cache', params);
    plugin.learn({ model: 'm', endpoint: keyOf('a'), role: 'aggregated', prefixHashes: [], mediaKeys: ['x', 'y', 'z'] });
    expect([plugin.holds(keyOf('a'), 'x'), plugin.holds(keyOf('a'), 'z')]).toEqual([false, true]);
    plugin.endpointRemoved(keyOf('a'));
    expect(score(plugin, ['z'])).toEqual([0, 0, 0, 0]);
  });

  it("sends an unseen item to its content key's home pod (the same on every replica), within the load bound", () => {
    const plugin = new EncoderCacheScorer('encoder-cache', { ...params, homeShare: 0.5 });
    const first = score(plugin, ['new']);
    expect(first.filter((s) => s === 50)).toHaveLength(1);
    expect(score(new EncoderCacheScorer('another-replica', { ...params, homeShare: 0.5 }), ['new'])).toEqual(first);
    const home = pods[first.indexOf(50)];
    const busy = new InflightTracker();
    for (let i = 0; i < 8; i++)
      busy.applyEvent('gw', { type: 'start', requestId: `r${i}`, endpoint: keyOf(home), stage: 'aggregated', at: TEST_NOW });
    expect(score(plugin, ['new'], busy)).toEqual([0, 0, 0, 0]);
  });

  it("gives an unseen item's home nothing when a pod holds another of the request's items (the new one misses anywhere)", () => {
    const plugin = new EncoderCacheScorer('encoder-cache', { ...params, homeShare: 1 });
    const home = pods[score(plugin, ['new']).indexOf(100)];
    const holder = pods.find((p) => p !== home) ?? 'a';
    plugin.learn({ model: 'm', endpoint: keyOf(holder), role: 'aggregated', prefixHashes: [], mediaKeys: ['x'] });
    expect(score(plugin, ['x', 'new'])).toEqual(pods.map((p) => (p === holder ? 50 : 0)));
    // Two unseen items: each gives its home its share, as for one.
    expect(score(plugin, ['new', 'other']).reduce((a, b) => a + b, 0)).toBe(100);
  });

  it('past the load bound, keeps the affinity of a pod whose running batch has room for one more request', () => {
    const plugin = new EncoderCacheScorer('encoder-cache', { ...params, loadFloor: 4 });
    plugin.learn({ model: 'm', endpoint: keyOf('a'), role: 'aggregated', prefixHashes: [], mediaKeys: ['x'] });
    const tracker = new InflightTracker();
    for (let i = 0; i < 9; i++)
      tracker.applyEvent('gw', { type: 'start', requestId: `r${i}`, endpoint: keyOf('a'), stage: 'aggregated', at: TEST_NOW });
    // 9 in flight on a, none elsewhere: the cap is max(ceil(1.25 · 10 / 4), 4) = 4, far below.
    const index = buildIndex(pods.map((pod) => ({ pod })));
    const scrape = (running: number, waiting: number) =>
      index.applyEndpoint({ op: 'PUT', value: endpointRecord({ pod: 'a', running, waiting }) });
    expect(score(plugin, ['x'], tracker, index)).toEqual([0, 0, 0, 0]);
    scrape(16, 0); // a has been seen running 16: a tenth request joins its batch
    scrape(8, 0);
    expect(score(plugin, ['x'], tracker, index)).toEqual([100, 0, 0, 0]);
    const noRoom = new EncoderCacheScorer('no-room', { ...params, loadFloor: 4, batchRoom: false });
    noRoom.learn({ model: 'm', endpoint: keyOf('a'), role: 'aggregated', prefixHashes: [], mediaKeys: ['x'] });
    expect(score(noRoom, ['x'], tracker, index)).toEqual([0, 0, 0, 0]);
    expect(score(noRoom, ['x'], new InflightTracker(), index)).toEqual([100, 0, 0, 0]);
    scrape(8, 1); // but not while its engine reports requests waiting
    expect(score(plugin, ['x'], tracker, index)).toEqual([0, 0, 0, 0]);
  });

  it('keeps the affinity of a pod a few requests above a lightly loaded pool (absolute floor), not far above it', () => {
    const plugin = new EncoderCacheScorer('encoder-cache', { ...params, loadFloor: 4 });
    plugin.learn({ model: 'm', endpoint: keyOf('a'), role: 'aggregated', prefixHashes: [], mediaKeys: ['x'] });
    const busy = (n: number): InflightTracker => {
      const t = new InflightTracker();
      for (let i = 0; i < n; i++)
        t.applyEvent('gw', { type: 'start', requestId: `r${i}`, endpoint: keyOf('a'), stage: 'aggregated', at: TEST_NOW });
      return t;
    };
    // 3 in flight on a, none elsewhere: the relative cap alone is ceil(1.25 · 4 / 4) = 2, the floor makes it 4.
    expect(score(plugin, ['x'], busy(3))).toEqual([100, 0, 0, 0]);
    const strict = new EncoderCacheScorer('strict', params);
    strict.learn({ model: 'm', endpoint: keyOf('a'), role: 'aggregated', prefixHashes: [], mediaKeys: ['x'] });
    expect(score(strict, ['x'], busy(3))).toEqual([0, 0, 0, 0]);
    // 4 in flight: the cap is max(ceil(1.25 · 5 / 4), 4) = 4, and a fifth would exceed it: a loses it.
    expect(score(plugin, ['x'], busy(4))).toEqual([0, 0, 0, 0]);
  });
});
