import type { IndexedEndpoint } from './endpoint';

/**
 * The metrics scorers read on every request, stored column-wise (one typed array per field) so a plugin's loop
 * over thousands of endpoints walks contiguous memory instead of chasing one heap object per endpoint.
 */
export class EndpointColumns {
  capacity: number;
  running: Float64Array;
  waiting: Float64Array;
  kvCacheUsage: Float64Array;
  ttftMs: Float64Array;
  tpotMs: Float64Array;
  latencyAt: Float64Array;
  scrapedAt: Float64Array;
  stale: Uint8Array;
  keyHash: Uint32Array;

  constructor(capacity = 16) {
    this.capacity = capacity;
    this.running = new Float64Array(capacity);
    this.waiting = new Float64Array(capacity);
    this.kvCacheUsage = new Float64Array(capacity);
    this.ttftMs = new Float64Array(capacity);
    this.tpotMs = new Float64Array(capacity);
    this.latencyAt = new Float64Array(capacity);
    this.scrapedAt = new Float64Array(capacity);
    this.stale = new Uint8Array(capacity);
    this.keyHash = new Uint32Array(capacity);
  }

  /** Makes room for `n` rows, keeping the first `keep` rows. */
  ensure(n: number, keep: number): void {
    if (n <= this.capacity) return;
    const cap = Math.max(n, this.capacity * 2);
    const grow = <T extends Float64Array | Uint8Array | Uint32Array>(a: T, make: (c: number) => T): T => {
      const b = make(cap);
      b.set(a.subarray(0, keep));
      return b;
    };
    this.running = grow(this.running, (c) => new Float64Array(c));
    this.waiting = grow(this.waiting, (c) => new Float64Array(c));
    this.kvCacheUsage = grow(this.kvCacheUsage, (c) => new Float64Array(c));
    this.ttftMs = grow(this.ttftMs, (c) => new Float64Array(c));
    this.tpotMs = grow(this.tpotMs, (c) => new Float64Array(c));
    this.latencyAt = grow(this.latencyAt, (c) => new Float64Array(c));
    this.scrapedAt = grow(this.scrapedAt, (c) => new Float64Array(c));
    this.stale = grow(this.stale, (c) => new Uint8Array(c));
    this.keyHash = grow(this.keyHash, (c) => new Uint32Array(c));
    this.capacity = cap;
  }

  /** Row `i` := the endpoint's current fields. */
  write(i: number, e: IndexedEndpoint): void {
    this.running[i] = e.running;
    this.waiting[i] = e.waiting;
    this.kvCacheUsage[i] = e.kvCacheUsage;
    this.ttftMs[i] = e.ttftMs;
    this.tpotMs[i] = e.tpotMs;
    this.latencyAt[i] = e.latencyAt;
    this.scrapedAt[i] = e.scrapedAt;
    this.stale[i] = e.stale ? 1 : 0;
    this.keyHash[i] = e.keyHash;
  }

  /** Row `i` := row `j` of `src` (which may be this). */
  copyRow(i: number, src: EndpointColumns, j: number): void {
    this.running[i] = src.running[j];
    this.waiting[i] = src.waiting[j];
    this.kvCacheUsage[i] = src.kvCacheUsage[j];
    this.ttftMs[i] = src.ttftMs[j];
    this.tpotMs[i] = src.tpotMs[j];
    this.latencyAt[i] = src.latencyAt[j];
    this.scrapedAt[i] = src.scrapedAt[j];
    this.stale[i] = src.stale[j];
    this.keyHash[i] = src.keyHash[j];
  }
}
