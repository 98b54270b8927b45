import type { DispatchEvent } from '@triad/bus';

function withoutLatency(event: DispatchEvent): DispatchEvent {
  const { ttftMs: _ttft, tpotMs: _tpot, ...rest } = event;
  return rest;
}

/** One request's dispatch events not yet applied to the tracker, and how many of its legs are still open. */
interface PendingRequest {
  readonly events: DispatchEvent[];
  open: number;
}

/**
 * This gateway's dispatch events held back from the local fallback's in-flight tracker while the scheduler service
 * decides (the fallback then decides nothing, and its counts are read only when it does). Events are kept per
 * request; once every leg a request started has finished, its events are dropped: a start and its finish leave the
 * tracker's counts and prefill backlog as they were, so only the legs still open are applied when the fallback has
 * to decide. Held per request id (one Map lookup on a string the events share) instead of the tracker's per-leg keys
 * and backlog sets; a held finish event
 * is held without its measured latency (the caller applies that as it comes: its moving average depends on the order).
 */
export class PendingLegs {
  readonly #byRequest = new Map<string, PendingRequest>();

  add(event: DispatchEvent): void {
    let pending = this.#byRequest.get(event.requestId);
    if (pending === undefined) {
      pending = { events: [], open: 0 };
      this.#byRequest.set(event.requestId, pending);
    }
    if (event.type === 'start') {
      pending.events.push(event);
      pending.open++;
      return;
    }
    if (--pending.open <= 0) this.#byRequest.delete(event.requestId);
    // Its latency was applied already; the event itself may be on its way to NATS, so it is copied, not changed.
    else pending.events.push(event.ttftMs === undefined && event.tpotMs === undefined ? event : withoutLatency(event));
  }

  /** Hands every held event to `apply` (each request's in their order) and forgets them. */
  drain(apply: (event: DispatchEvent) => void): void {
    for (const pending of this.#byRequest.values()) for (const event of pending.events) apply(event);
    this.#byRequest.clear();
  }

  /** Requests with legs open (held events). */
  get size(): number {
    return this.#byRequest.size;
  }
}
