import type { MediaItem } from '@triad/bus';
import { InflightTracker } from '../../state/inflight-tracker';
import { buildIndex, candidatesOf, keyOf, pluginContext } from '../../testing';
import { TEST_NOW } from '../../testing/clock';
import type { Candidates } from '../../framework/candidates';
import { EncoderAffinityPicker } from './encoder-affinity';

const encoders = ['e0', 'e1', 'e2', 'e3'];
const item = (key: string): MediaItem => ({ index: 0, key, modality: 'image' });

function setup(inflight: Record<string, number> = {}, pods = encoders) {
  const index = buildIndex(pods.map((pod) => ({ pod, role: 'encode' as const })));
  const tracker = new InflightTracker();
  tracker.applyBatch(
    { v: 1, gateway: 'gw', seq: 0, events: [], inflight: Object.fromEntries(Object.entries(inflight).map(([p, n]) => [keyOf(p), n])) },
    TEST_NOW,
  );
  const candidates = candidatesOf(index, pods, tracker);
  const ctx = pluginContext();
  const finals = new Float64Array(pods.length);
  return { candidates, ctx, finals };
}

const podOf = (c: Candidates, i: number | undefined): string => c.endpoint(i as number).record.pod;

describe('encoder-affinity', () => {
  const picker = new EncoderAffinityPicker('encoder-affinity', { loadFactor: 1.25 });

  it('sends the same content to the same encoder every time, with the rest as alternates', () => {
    const { candidates, ctx, finals } = setup();
    const a = picker.pick(ctx, { candidates, finals, count: 4, item: item('u:cat') });
    const b = picker.pick(ctx, { candidates, finals, count: 4, item: item('u:cat') });
    expect(a).toEqual(b);
    expect(a.affinity).toBe(true);
    expect(new Set(a.order).size).toBe(4);
  });

  it('spreads different content over the encoders', () => {
    const { candidates, ctx, finals } = setup();
    const homes = new Set(
      Array.from({ length: 40 }, (_, i) =>
        podOf(candidates, picker.pick(ctx, { candidates, finals, count: 1, item: item(`u:img-${i}`) }).order[0]),
      ),
    );
    expect(homes.size).toBe(4);
  });

  it('spills a hot key to its next encoder when its home is over the load bound, and always the same one', () => {
    const calm = setup();
    const home = podOf(
      calm.candidates,
      picker.pick(calm.ctx, { candidates: calm.candidates, finals: calm.finals, count: 4, item: item('u:hot') }).order[0],
    );
    const second = podOf(
      calm.candidates,
      picker.pick(calm.ctx, { candidates: calm.candidates, finals: calm.finals, count: 4, item: item('u:hot') }).order[1],
    );
    // total load 8+1 over 4 encoders: cap = ceil(1.25·9/4) = 3, and the home has 8.
    const hot = setup({ [home]: 8 });
    const spilled = picker.pick(hot.ctx, { candidates: hot.candidates, finals: hot.finals, count: 4, item: item('u:hot') });
    expect(podOf(hot.candidates, spilled.order[0])).toBe(second);
    expect(spilled.affinity).toBe(false);
    expect(spilled.order.map((i) => podOf(hot.candidates, i))).toContain(home);
  });

  it.each([
    // Two encoders, four items of one key. loadFactor 1.25: caps 1,2,2,3 → home,home,other,home.
    { loadFactor: 1.25, expectedHomeShare: 3 },
    // loadFactor 1: caps 1,1,2,2 → home,other,home,other.
    { loadFactor: 1, expectedHomeShare: 2 },
  ])('bounds the share of one hot key inside a request (loadFactor $loadFactor)', ({ loadFactor, expectedHomeShare }) => {
    const p = new EncoderAffinityPicker('encoder-affinity', { loadFactor });
    const { candidates, ctx, finals } = setup({}, ['e0', 'e1']);
    const pending = new Int32Array(2);
    const placed: number[] = [];
    for (let i = 0; i < 4; i++) {
      const first = p.pick(ctx, { candidates, finals, count: 2, item: item('u:same'), pending }).order[0];
      pending[first] = pending[first] + 1;
      placed.push(first);
    }
    const home = placed[0];
    expect(placed.filter((i) => i === home)).toHaveLength(expectedHomeShare);
  });
});
