import type { SchedulingRequest } from '@triad/bus';
import type { CycleContext, ProfileRole } from '../framework/plugin';
import type { Endpoint } from '../state/endpoint';
import type { IndexedEndpoint } from '../state/endpoint';
import type { EndpointIndex } from '../state/endpoint-index';
import type { InflightTracker } from '../state/inflight-tracker';
import { hashString32 } from '../hashing/fast-hash';

/**
 * The one mutable context of a scheduler, reset for each request and each profile run. Positions are answered from
 * a stamp written on the candidates' index objects, and in-flight counts from a cell cached on them, so neither
 * needs a per-request map.
 */
export class Cycle implements CycleContext {
  request!: SchedulingRequest;
  now = 0;
  seed = 0;
  role: ProfileRole = 'aggregated';
  #stamp = 0;
  #stamped = true;
  #candidates: readonly Endpoint[] = [];
  readonly #index: EndpointIndex;
  readonly #tracker: InflightTracker;

  constructor(index: EndpointIndex, tracker: InflightTracker) {
    this.#index = index;
    this.#tracker = tracker;
  }

  begin(request: SchedulingRequest, now: number): void {
    this.request = request;
    this.now = now;
    this.seed = hashString32(request.id);
  }

  /**
   * Declares `candidates` as the set being scored. Stamping them (so `position` can answer by key) waits until a
   * plugin first asks for a position: most requests never do.
   */
  stampCandidates(candidates: readonly Endpoint[]): void {
    this.#candidates = candidates;
    this.#stamped = false;
  }

  position(key: string): number {
    if (!this.#stamped) this.#stampNow();
    const e = this.#index.getIndexed(key);
    return e !== undefined && e.stamp === this.#stamp ? e.slot : -1;
  }

  #stampNow(): void {
    const stamp = ++this.#stamp;
    const candidates = this.#candidates;
    for (let i = 0; i < candidates.length; i++) {
      const e = candidates[i] as IndexedEndpoint;
      e.stamp = stamp;
      e.slot = i;
    }
    this.#stamped = true;
  }

  inflight(e: Endpoint): number {
    const ie = e as IndexedEndpoint;
    if (ie.cellOwner !== this.#tracker || ie.cell === undefined) {
      ie.cell = this.#tracker.cell(ie.key);
      ie.cellOwner = this.#tracker;
    }
    return ie.cell.count;
  }
}
