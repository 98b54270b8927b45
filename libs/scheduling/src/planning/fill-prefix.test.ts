import { fillPrefix } from './fill-prefix';

describe('fillPrefix', () => {
  it('sets the first n cells as fill(value, 0, n) does and leaves the rest', () => {
    for (const n of [0, 1, 3, 8]) {
      const ours = Float64Array.from([5, 6, 7, 8, 9, 10, 11, 12]);
      const theirs = Float64Array.from(ours);
      fillPrefix(ours, -1, n);
      theirs.fill(-1, 0, n);
      expect(Array.from(ours)).toEqual(Array.from(theirs));
    }
    const keep = new Uint8Array([0, 0, 0, 0]);
    fillPrefix(keep, 1, 2);
    expect(Array.from(keep)).toEqual([1, 1, 0, 0]);
    const positions = new Int32Array([4, 4, 4]);
    fillPrefix(positions, -1, 3);
    expect(Array.from(positions)).toEqual([-1, -1, -1]);
  });
});
