import { rendezvousOwner } from './rendezvous';

describe('rendezvousOwner', () => {
  const keys = Array.from({ length: 2000 }, (_, i) => `default.model.pod-${i}`);

  it('gives every key one owner among the members, the same whatever the members order', () => {
    const members = ['a', 'b', 'c', 'd'];
    for (const key of keys.slice(0, 200)) {
      const owner = rendezvousOwner(key, members);
      expect(members).toContain(owner);
      expect(rendezvousOwner(key, [...members].reverse())).toBe(owner);
    }
    expect(rendezvousOwner('k', [])).toBeUndefined();
  });

  it('moves only the keys of a member that leaves, and spreads them over the rest', () => {
    const before = new Map(keys.map((k) => [k, rendezvousOwner(k, ['a', 'b', 'c', 'd'])]));
    const after = new Map(keys.map((k) => [k, rendezvousOwner(k, ['a', 'b', 'c'])]));
    const moved = keys.filter((k) => before.get(k) !== after.get(k));
    expect(moved.every((k) => before.get(k) === 'd')).toBe(true);
    expect(moved.length).toBe(keys.filter((k) => before.get(k) === 'd').length);
    // Each member of four holds a fair share (a quarter, within a wide margin).
    for (const m of ['a', 'b', 'c', 'd']) {
      const share = keys.filter((k) => before.get(k) === m).length / keys.length;
      expect(share).toBeGreaterThan(0.18);
      expect(share).toBeLessThan(0.32);
    }
  });
});
