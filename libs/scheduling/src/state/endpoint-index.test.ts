import { objectKey } from '@triad/bus';
import { endpointRecord, keyOf, modelServerRecord } from '../testing';
import { EndpointIndex } from './endpoint-index';
import { EndpointList } from './endpoint-list';
import type { CandidateSource } from './model-server-pool';

const pods = (source: CandidateSource): string[] =>
  (source instanceof EndpointList ? source.items : source).map((e) => e.record.pod).sort();

describe('EndpointIndex', () => {
  it("finds each ModelServer's pool by its names, asked in turn, before and after its record comes and goes", () => {
    const index = new EndpointIndex();
    expect(index.pool('default', 'a')).toBeUndefined();
    index.applyModelServer({ op: 'PUT', value: modelServerRecord({ name: 'a', mode: 'pd' }) });
    index.applyModelServer({ op: 'PUT', value: modelServerRecord({ name: 'b', mode: 'epd' }) });
    index.applyModelServer({ op: 'PUT', value: modelServerRecord({ namespace: 'other', name: 'a', mode: 'aggregated' }) });
    for (let i = 0; i < 3; i++) {
      expect(index.pool('default', 'a')?.record?.mode).toBe('pd');
      expect(index.pool('default', 'a')?.record?.mode).toBe('pd');
      expect(index.pool('default', 'b')?.record?.mode).toBe('epd');
      expect(index.pool('other', 'a')?.record?.mode).toBe('aggregated');
      expect(index.pool('other', 'b')).toBeUndefined();
    }
    index.applyModelServer({ op: 'DEL', key: objectKey('default', 'b') });
    expect(index.pool('default', 'b')?.record).toBeUndefined();
    index.applyModelServer({ op: 'PUT', value: modelServerRecord({ name: 'b', mode: 'pd' }) });
    expect(index.pool('default', 'b')?.record?.mode).toBe('pd');
  });

  it('files ready endpoints by role and group, and moves them when labels or readiness change', () => {
    const index = new EndpointIndex();
    index.applyModelServer({ op: 'PUT', value: modelServerRecord({ mode: 'epd' }) });
    index.applyEndpoint({ op: 'PUT', value: endpointRecord({ pod: 'd1', role: 'decode', group: 'g1' }) });
    index.applyEndpoint({ op: 'PUT', value: endpointRecord({ pod: 'p1', role: 'prefill', group: 'g1' }) });
    index.applyEndpoint({ op: 'PUT', value: endpointRecord({ pod: 'p2', role: 'prefill', group: 'g2' }) });
    index.applyEndpoint({ op: 'PUT', value: endpointRecord({ pod: 'e1', role: 'encode', group: 'g1' }) });
    index.applyEndpoint({ op: 'PUT', value: endpointRecord({ pod: 'eshared', role: 'encode' }) });
    const pool = index.pool('default', 'ms');
    expect(pool?.record?.mode).toBe('epd');
    expect(pods(pool?.decode ?? [])).toEqual(['d1']);
    expect(pods(pool?.prefill('g1') ?? [])).toEqual(['p1']);
    expect(pods(pool?.encoders('g1') ?? [])).toEqual(['e1', 'eshared']);
    expect(pods(pool?.encoders('g2') ?? [])).toEqual(['eshared']);

    // relabel p1 into g2, take e1 out of service, flip d1 to prefill
    index.applyEndpoint({ op: 'PUT', value: endpointRecord({ pod: 'p1', role: 'prefill', group: 'g2' }) });
    index.applyEndpoint({ op: 'PUT', value: endpointRecord({ pod: 'e1', role: 'encode', group: 'g1', ready: false }) });
    index.applyEndpoint({ op: 'PUT', value: endpointRecord({ pod: 'd1', role: 'prefill', group: 'g1' }) });
    expect(pods(pool?.prefill('g2') ?? [])).toEqual(['p1', 'p2']);
    expect(pods(pool?.prefill('g1') ?? [])).toEqual(['d1']);
    expect(pool?.decode.size).toBe(0);
    expect(pods(pool?.encoders('g1') ?? [])).toEqual(['eshared']);
    expect(index.countByRole()).toEqual({ aggregated: 0, encode: 1, prefill: 3, decode: 0 });
    expect(index.size).toBe(5);
  });

  it('counts ready endpoints without usable metrics (never scraped or stale), as stale-metrics would drop them', () => {
    const index = new EndpointIndex();
    index.applyEndpoint({ op: 'PUT', value: endpointRecord({ pod: 'fresh' }) });
    index.applyEndpoint({ op: 'PUT', value: endpointRecord({ pod: 'unscraped', scrapedAt: 0 }) });
    index.applyEndpoint({ op: 'PUT', value: endpointRecord({ pod: 'failing', stale: true }) });
    index.applyEndpoint({ op: 'PUT', value: endpointRecord({ pod: 'down', scrapedAt: 0, ready: false }) });
    expect(index.countWithoutMetrics()).toBe(2);
    index.applyEndpoint({ op: 'PUT', value: endpointRecord({ pod: 'unscraped' }) });
    expect(index.countWithoutMetrics()).toBe(1);
  });

  it("ages endpoints by their pod-watcher replica's scrape freshness, in the candidate columns too", () => {
    const index = new EndpointIndex();
    const scrapedAt = (pod: string) => index.get(keyOf(pod))?.scrapedAt;
    const column = (pod: string) => {
      const list = index.pool('default', 'ms')?.aggregated;
      const e = index.getIndexed(keyOf(pod));
      return e && list ? list.columns.scrapedAt[e.listPos] : undefined;
    };
    index.applyEndpoint({ op: 'PUT', value: endpointRecord({ pod: 'a', scrapedAt: 1000, scrapedBy: 'w1' }) });
    index.applyEndpoint({ op: 'PUT', value: endpointRecord({ pod: 'b', scrapedAt: 1000, scrapedBy: 'w2' }) });
    index.applyEndpoint({ op: 'PUT', value: endpointRecord({ pod: 'old', scrapedAt: 1000 }) });
    index.applyEndpoint({ op: 'PUT', value: endpointRecord({ pod: 'never', scrapedAt: 0, scrapedBy: 'w1' }) });
    index.applyFreshness({ op: 'PUT', key: 'w1', value: { schemaVersion: 1, replica: 'w1', confirmedAt: 5000 } });
    expect([scrapedAt('a'), scrapedAt('b'), scrapedAt('old'), scrapedAt('never')]).toEqual([5000, 1000, 1000, 0]);
    expect(column('a')).toBe(5000);
    expect(index.countWithoutMetrics()).toBe(1);

    // A record written after the confirmation keeps its own later time; one moved to w2 takes w2's.
    index.applyEndpoint({ op: 'PUT', value: endpointRecord({ pod: 'a', scrapedAt: 6000, scrapedBy: 'w1' }) });
    expect(scrapedAt('a')).toBe(6000);
    index.applyFreshness({ op: 'PUT', key: 'w2', value: { schemaVersion: 1, replica: 'w2', confirmedAt: 7000 } });
    index.applyEndpoint({ op: 'PUT', value: endpointRecord({ pod: 'a', scrapedAt: 6000, scrapedBy: 'w2' }) });
    expect([scrapedAt('a'), scrapedAt('b'), column('a'), column('b')]).toEqual([7000, 7000, 7000, 7000]);
    index.applyFreshness({ op: 'PUT', key: 'w1', value: { schemaVersion: 1, replica: 'w1', confirmedAt: 9000 } });
    expect(scrapedAt('a')).toBe(7000);

    // A lower confirmation lowers the times again; a deleted freshness record leaves the records' own.
    index.applyFreshness({ op: 'PUT', key: 'w2', value: { schemaVersion: 1, replica: 'w2', confirmedAt: 6500 } });
    expect([scrapedAt('a'), scrapedAt('b')]).toEqual([6500, 6500]);
    index.applyFreshness({ op: 'DEL', key: 'w2' });
    expect([scrapedAt('a'), scrapedAt('b'), column('b')]).toEqual([6000, 1000, 1000]);

    // A removed endpoint is no longer aged (nor held) by its replica's freshness.
    index.applyEndpoint({ op: 'DEL', key: keyOf('b') });
    index.applyFreshness({ op: 'PUT', key: 'w2', value: { schemaVersion: 1, replica: 'w2', confirmedAt: 8000 } });
    expect([scrapedAt('a'), index.get(keyOf('b'))]).toEqual([8000, undefined]);
  });

  it('swaps the record in place on a metrics update without touching the lists', () => {
    const index = new EndpointIndex();
    index.applyEndpoint({ op: 'PUT', value: endpointRecord({ pod: 'a' }) });
    const before = index.get(keyOf('a'));
    const list = index.pool('default', 'ms')?.aggregated;
    const version = list?.version;
    index.applyEndpoint({ op: 'PUT', value: endpointRecord({ pod: 'a', running: 7 }) });
    expect(index.get(keyOf('a'))).toBe(before);
    expect(before?.record.metrics.running).toBe(7);
    expect(list?.version).toBe(version);
  });

  it('removes deleted endpoints from their list and tells listeners', () => {
    const index = new EndpointIndex();
    const removed: string[] = [];
    index.onEndpointRemoved((k) => removed.push(k));
    for (const pod of ['a', 'b', 'c']) index.applyEndpoint({ op: 'PUT', value: endpointRecord({ pod }) });
    index.applyEndpoint({ op: 'DEL', key: keyOf('a') });
    index.applyEndpoint({ op: 'DEL', key: keyOf('nope') });
    expect(pods(index.pool('default', 'ms')?.aggregated ?? [])).toEqual(['b', 'c']);
    expect(removed).toEqual([keyOf('a')]);
    expect(index.get(keyOf('a'))).toBeUndefined();
  });

  it('forgets a ModelServer record on delete but keeps its endpoints until they are deleted too', () => {
    const index = new EndpointIndex();
    index.applyModelServer({ op: 'PUT', value: modelServerRecord() });
    index.applyEndpoint({ op: 'PUT', value: endpointRecord({ pod: 'a' }) });
    index.applyModelServer({ op: 'DEL', key: objectKey('default', 'ms') });
    expect(index.pool('default', 'ms')?.record).toBeUndefined();
    expect(index.pool('default', 'ms')?.aggregated.size).toBe(1);
    expect(index.modelServerCount).toBe(0);
  });
});
