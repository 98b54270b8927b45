import { Counter, Gauge, Registry } from 'prom-client';
import type { FollowerCounter, FollowerMetrics, KvIndexer } from '@triad/kv-events';

/** The indexer's Prometheus metrics: per-pod event counters (`triad_kv_indexer_<counter>_total{pod}`) and gauges. */
export class IndexerMetrics implements FollowerMetrics {
  readonly registry = new Registry();
  readonly #counters = new Map<FollowerCounter, Counter<'pod'>>();

  inc(counter: FollowerCounter, pod: string, n = 1): void {
    let c = this.#counters.get(counter);
    if (!c) {
      c = new Counter({
        name: `triad_kv_indexer_${counter}_total`,
        help: `KV-event ${counter.replace(/_/g, ' ')} per pod`,
        labelNames: ['pod'] as const,
        registers: [this.registry],
      });
      this.#counters.set(counter, c);
    }
    c.inc({ pod }, n);
  }

  watch(indexer: KvIndexer): void {
    new Gauge({
      name: 'triad_kv_indexer_sources',
      help: 'Event sources this replica follows, by state',
      labelNames: ['state'] as const,
      registers: [this.registry],
      collect() {
        let live = 0;
        let down = 0;
        for (const s of indexer.following)
          if (indexer.followerOf(s)?.live) live++;
          else down++;
        this.set({ state: 'live' }, live);
        this.set({ state: 'down' }, down);
      },
    });
    new Gauge({
      name: 'triad_kv_indexer_blocks',
      help: 'Blocks held over the sources this replica follows',
      registers: [this.registry],
      collect() {
        let n = 0;
        for (const s of indexer.following) n += indexer.followerOf(s)?.blocks.size ?? 0;
        this.set(n);
      },
    });
  }
}
