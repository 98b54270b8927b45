import { WORKLOADS, type SimRequest } from '../cluster-sim/workload';
import { repeatCeiling, workloadRequests } from './load';

const withImages = (...images: number[][]): SimRequest[] => images.map((list) => ({ images: list }) as unknown as SimRequest);

describe('repeatCeiling', () => {
  it('counts the measured items that repeat an image sent before, warm-up included', () => {
    // Warm-up: the first of four requests (image 1). Measured: [1, 2], [2], [3] → 1 and the second 2 repeat.
    expect(repeatCeiling(withImages([1], [1, 2], [2], [3]), 0.25)).toBeCloseTo(2 / 4);
    expect(repeatCeiling(withImages([], []), 0)).toBeNaN();
  });

  it('rises with the run length on image-qa (seed 1): the short runs cap any router', () => {
    const at = (n: number) => repeatCeiling(workloadRequests(WORKLOADS['image-qa'], 1, 50, n), 0.2);
    expect(at(300)).toBeCloseTo(0.815, 3);
    expect(at(400)).toBeCloseTo(0.848, 3);
    expect(at(1500)).toBeGreaterThan(0.95);
  });
});
