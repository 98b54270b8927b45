import type { EndpointRecord } from '@triad/bus';
import { DpRankBalancer } from './dp-rank-balancer';

const ref = { key: 'default.ms.p', pod: 'p', ip: '10.0.0.1', port: 30000 };

function record(extra: Partial<EndpointRecord>, metrics: Partial<EndpointRecord['metrics']> = {}): EndpointRecord {
  return {
    schemaVersion: 1,
    namespace: 'default',
    modelServer: 'ms',
    pod: 'p',
    role: 'prefill',
    ip: '10.0.0.1',
    port: 30000,
    engine: 'SGLang',
    ready: true,
    models: ['m'],
    updatedAt: 1,
    metrics: { running: 0, waiting: 0, kvCacheUsage: 0, scrapedAt: 1000, stale: false, ...metrics },
    ...extra,
  };
}

describe('DpRankBalancer', () => {
  it('gives no hint to engines without DP, to vLLM and to endpoints it does not know', () => {
    const records = new Map<string, EndpointRecord>();
    const b = new DpRankBalancer((k) => records.get(k));
    expect(b.pick(ref)).toBeUndefined();
    records.set(ref.key, record({}));
    expect(b.pick(ref)).toBeUndefined();
    records.set(ref.key, record({ dpSize: 1 }));
    expect(b.pick(ref)).toBeUndefined();
    records.set(ref.key, record({ dpSize: 4, engine: 'vLLM' }));
    expect(b.pick(ref)).toBeUndefined();
  });

  it('lets idle ranks take turns, and counts its own legs until the next scrape', () => {
    let current = record({ dpSize: 3 });
    const b = new DpRankBalancer(() => current);
    expect([0, 1, 2, 3, 4, 5].map(() => b.pick(ref))).toEqual([0, 1, 2, 0, 1, 2]);
    // A newer scrape shows rank 0 busy: the legs sent before it are in its numbers, so the counts start over.
    const dpRanks = [
      { running: 2, waiting: 1 },
      { running: 0, waiting: 0 },
      { running: 1, waiting: 0 },
    ];
    current = record({ dpSize: 3 }, { scrapedAt: 2000, dpRanks });
    expect([0, 1, 2, 3].map(() => b.pick(ref))).toEqual([1, 1, 2, 1]);
  });

  it('forgets an endpoint that left the KV', () => {
    const b = new DpRankBalancer(() => record({ dpSize: 2 }));
    b.pick(ref);
    expect(b.size).toBe(1);
    b.endpoint({ key: ref.key, op: 'DEL', revision: 2 });
    expect(b.size).toBe(0);
  });
});
