import type { EndpointRecord, EndpointRef } from '@triad/bus';
import type { KvChange } from '@triad/bus/client';
import type { KvViewListener } from '../state/kv-view';

interface RankState {
  /** `metrics.scrapedAt` of the record the counts below were started against. */
  scrapedAt: number;
  /** Legs this gateway sent to each rank since that scrape. */
  readonly sent: number[];
}

/**
 * Picks the data-parallel rank of an SGLang engine for each leg (`routed_dp_rank`, and `disagg_prefill_dp_rank`
 * for the decode of a PD pair) so that load spreads over the ranks: the rank with the least scraped load
 * (running + waiting of that rank, `metrics.dpRanks`) plus the legs this gateway sent it since that scrape; ties go
 * to the lowest rank, which makes equal ranks take turns. Engines without DP (`dpSize` absent or 1) get no hint.
 */
export class DpRankBalancer implements KvViewListener {
  readonly #endpoints: (key: string) => EndpointRecord | undefined;
  readonly #state = new Map<string, RankState>();

  constructor(endpoints: (key: string) => EndpointRecord | undefined) {
    this.#endpoints = endpoints;
  }

  /** A rank for one leg to `endpoint`, or undefined when it has none to choose. */
  readonly pick = (endpoint: EndpointRef): number | undefined => {
    const record = this.#endpoints(endpoint.key);
    const size = record?.engine === 'SGLang' ? (record.dpSize ?? 1) : 1;
    if (record === undefined || size <= 1) return undefined;
    const scrapedAt = record.metrics.scrapedAt;
    let state = this.#state.get(endpoint.key);
    if (state === undefined || state.sent.length !== size) {
      state = { scrapedAt, sent: new Array<number>(size).fill(0) };
      this.#state.set(endpoint.key, state);
    } else if (state.scrapedAt !== scrapedAt) {
      // A newer scrape already counts the legs sent before it.
      state.scrapedAt = scrapedAt;
      state.sent.fill(0);
    }
    const scraped = record.metrics.dpRanks;
    let best = 0;
    let bestLoad = Infinity;
    for (let r = 0; r < size; r++) {
      const s = scraped?.[r];
      const load = (s === undefined ? 0 : s.running + s.waiting) + state.sent[r];
      if (load < bestLoad) {
        best = r;
        bestLoad = load;
      }
    }
    state.sent[best] = state.sent[best] + 1;
    return best;
  };

  /** Forgets an endpoint that left (fed by the KV view). */
  endpoint(change: KvChange<EndpointRecord>): void {
    if (change.op !== 'PUT') this.#state.delete(change.key);
  }

  modelServer(): void {
    // Ranks belong to endpoints; ModelServer changes do not matter here.
  }

  /** Endpoints currently tracked (tests, debugging). */
  get size(): number {
    return this.#state.size;
  }
}
