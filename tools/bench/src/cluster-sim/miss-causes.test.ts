import { CLUSTER_COST } from '../cluster-bench/engine-profile';
import { repeatCeiling, workloadRequests } from '../cluster-bench/load';
import { MISS_CAUSES, MissCauses } from './miss-causes';
import { makePolicy } from './policy-set';
import { runSimulation, type PoolKind } from './simulate';
import { WORKLOADS } from './workload';

const REQUESTS = 400;
const WARMUP = 0.2;

function judge(pool: PoolKind, policy: 'triad' | 'random'): MissCauses {
  const causes = new MissCauses(REQUESTS * WARMUP);
  runSimulation(
    causes.wrap((p) => makePolicy(policy, p)),
    {
      pool,
      workload: WORKLOADS['image-qa'],
      capacity: 40,
      engines: 8,
      load: 1,
      requests: REQUESTS,
      seed: 1,
      cost: CLUSTER_COST,
      warmup: WARMUP,
    },
  );
  return causes;
}

describe('encoder misses by cause (simulator)', () => {
  it('judges every measured image item once; first sends are the items the run ceiling leaves out', () => {
    const causes = judge('aggregated', 'triad');
    const requests = workloadRequests(WORKLOADS['image-qa'], 1, 40, REQUESTS);
    const items = requests.slice(REQUESTS * WARMUP).reduce((n, r) => n + r.images.length, 0);
    expect(MISS_CAUSES.reduce((n, c) => n + causes.counts[c], 0)).toBe(items);
    expect(causes.shares()['first-send']).toBeCloseTo(1 - repeatCeiling(requests, WARMUP), 10);
  });

  it('shows what affinity changes: Triad passes over far fewer held images than random, in aggregated and PD pools', () => {
    for (const pool of ['aggregated', 'pd'] as const) {
      const triad = judge(pool, 'triad').shares();
      const random = judge(pool, 'random').shares();
      expect(triad.held).toBeGreaterThan(random.held);
      expect(triad['passed-over']).toBeLessThan(random['passed-over'] / 2);
    }
  });

  it('never counts a split on encoders, which are chosen per item', () => {
    expect(judge('epd', 'triad').counts.split).toBe(0);
  });
});
