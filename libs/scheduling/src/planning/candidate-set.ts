import type { Candidates } from '../framework/candidates';
import type { IndexedEndpoint, InflightCell } from '../state/endpoint';
import { EndpointColumns } from '../state/endpoint-columns';
import type { EndpointIndex } from '../state/endpoint-index';
import { EndpointList } from '../state/endpoint-list';
import type { CandidateSource } from '../state/model-server-pool';
import type { InflightTracker } from '../state/inflight-tracker';
import type { ObservedLatency } from '../state/observed-latency';
import type { PrefillBacklog } from '../state/prefill-backlog';
import { fillPrefix } from './fill-prefix';

/** In-flight count of an endpoint, through the tracker cell cached on it (rebound if the tracker changed). */
function inflightOf(e: IndexedEndpoint, tracker: InflightTracker): number {
  let cell: InflightCell | undefined = e.cell;
  if (e.cellOwner !== tracker || cell === undefined) {
    cell = tracker.cell(e.key);
    e.cell = cell;
    e.cellOwner = tracker;
  }
  return cell.count;
}

/**
 * The reusable candidate set of one profile slot. It starts as a zero-copy view of a list's columns (the common
 * case) or as a copy of a few lists' endpoints; a filter that removes something makes it compact into its own
 * buffers. Nothing here allocates per request once the buffers have grown to the fleet's size.
 */
export class CandidateSet implements Candidates {
  size = 0;
  #cols: EndpointColumns;
  #endpoints: readonly IndexedEndpoint[] = [];
  readonly #own = new EndpointColumns();
  #ownEndpoints: IndexedEndpoint[] = [];
  /** The list this set is a view or subset of (indexOf by list position), else undefined. */
  #list: EndpointList | undefined;
  #isView = false;
  /** For a subset of a list: list position of candidate i. */
  #origin = new Int32Array(16);
  #posInSet = new Int32Array(16);
  #posValid = false;
  #keyMap: Map<string, number> | undefined;
  #inflight = new Float64Array(16);
  #inflightValid = false;
  readonly #index: EndpointIndex;
  readonly #tracker: InflightTracker;

  constructor(index: EndpointIndex, tracker: InflightTracker) {
    this.#index = index;
    this.#tracker = tracker;
    this.#cols = this.#own;
  }

  get running(): Float64Array {
    return this.#cols.running;
  }
  get waiting(): Float64Array {
    return this.#cols.waiting;
  }
  get kvCacheUsage(): Float64Array {
    return this.#cols.kvCacheUsage;
  }
  get ttftMs(): Float64Array {
    return this.#cols.ttftMs;
  }
  get tpotMs(): Float64Array {
    return this.#cols.tpotMs;
  }
  get latencyAt(): Float64Array {
    return this.#cols.latencyAt;
  }
  get scrapedAt(): Float64Array {
    return this.#cols.scrapedAt;
  }
  get stale(): Uint8Array {
    return this.#cols.stale;
  }
  get keyHash(): Uint32Array {
    return this.#cols.keyHash;
  }
  get observed(): ObservedLatency {
    return this.#tracker.latency;
  }
  get backlog(): PrefillBacklog {
    return this.#tracker.backlog;
  }

  endpoint(i: number): IndexedEndpoint {
    return this.#endpoints[i];
  }

  /** Starts a run over `source`. */
  reset(source: CandidateSource): void {
    this.#posValid = false;
    this.#keyMap = undefined;
    this.#inflightValid = false;
    if (source instanceof EndpointList) {
      this.#list = source;
      this.#isView = true;
      this.#cols = source.columns;
      this.#endpoints = source.items;
      this.size = source.size;
      return;
    }
    this.#list = undefined;
    this.#isView = false;
    this.#cols = this.#own;
    const n = source.length;
    this.#own.ensure(n, 0);
    this.#ownEndpoints.length = n;
    for (let i = 0; i < n; i++) {
      const e = source[i];
      this.#ownEndpoints[i] = e;
      this.#own.write(i, e);
    }
    this.#endpoints = this.#ownEndpoints;
    this.size = n;
  }

  /** Keeps the candidates whose `keep` flag is 1; returns false (and changes nothing) when all are kept. */
  compact(keep: Uint8Array): boolean {
    const n = this.size;
    let first = 0;
    while (first < n && keep[first] === 1) first++;
    if (first === n) return false;
    const src = this.#cols;
    const srcEndpoints = this.#endpoints;
    const fromView = this.#isView;
    if (fromView) {
      this.#own.ensure(n, 0);
      this.#ownEndpoints.length = n;
      if (this.#origin.length < n) this.#origin = new Int32Array(Math.max(n, this.#origin.length * 2));
    }
    const dst = this.#own;
    const ends = this.#ownEndpoints;
    const origin = this.#origin;
    let j = 0;
    for (let i = 0; i < n; i++) {
      if (keep[i] !== 1) continue;
      if (fromView || j !== i) {
        dst.copyRow(j, src, i);
        ends[j] = srcEndpoints[i];
        if (this.#inflightValid) this.#inflight[j] = this.#inflight[i];
      }
      if (this.#list) origin[j] = fromView ? i : origin[i];
      j++;
    }
    ends.length = j;
    this.#cols = dst;
    this.#endpoints = ends;
    this.#isView = false;
    this.size = j;
    this.#posValid = false;
    this.#keyMap = undefined;
    return true;
  }

  indexOf(key: string): number {
    const e = this.#index.getIndexed(key);
    if (!e) return -1;
    const list = this.#list;
    if (!list) return this.#byKey(key);
    if (!list.holds(e)) return -1;
    if (this.#isView) return e.listPos < this.size ? e.listPos : -1;
    if (!this.#posValid) this.#buildPositions(list.size);
    return this.#posInSet[e.listPos];
  }

  inflight(): Float64Array {
    if (this.#inflightValid) return this.#inflight;
    const n = this.size;
    if (this.#inflight.length < n) this.#inflight = new Float64Array(Math.max(n, this.#inflight.length * 2));
    const out = this.#inflight;
    const active = this.#tracker.active();
    if (active.size * 4 < n) {
      // Few busy endpoints: place their counts by key instead of visiting every endpoint object.
      fillPrefix(out, 0, n);
      for (const [key, cell] of active) {
        const i = this.indexOf(key);
        if (i >= 0) out[i] = cell.count;
      }
    } else {
      for (let i = 0; i < n; i++) out[i] = inflightOf(this.#endpoints[i], this.#tracker);
    }
    this.#inflightValid = true;
    return out;
  }

  #buildPositions(listSize: number): void {
    if (this.#posInSet.length < listSize) this.#posInSet = new Int32Array(Math.max(listSize, this.#posInSet.length * 2));
    fillPrefix(this.#posInSet, -1, listSize);
    for (let j = 0; j < this.size; j++) this.#posInSet[this.#origin[j]] = j;
    this.#posValid = true;
  }

  #byKey(key: string): number {
    if (!this.#keyMap) {
      this.#keyMap = new Map();
      for (let i = 0; i < this.size; i++) this.#keyMap.set(this.#endpoints[i].key, i);
    }
    return this.#keyMap.get(key) ?? -1;
  }
}
