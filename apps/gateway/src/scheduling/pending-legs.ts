import type { DispatchEvent } from '@triad/bus';

function withoutLatency(event: DispatchEvent): DispatchEvent {
  const { ttftMs: _ttft, tpotMs: _tpot, ...rest } = event;
  return rest;
}

/** Whether a held start on the finish's endpoint and stage has no held finish yet. */
function holdsOpenLeg(pending: PendingRequest, finish: DispatchEvent): boolean {
  let open = 0;
  for (const e of pending.events) if (e.endpoint === finish.endpoint && e.stage === finish.stage) open += e.type === 'start' ? 1 : -1;
  return open > 0;
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

  /**
   * Holds `event`, or returns false when the caller must apply it now: a finish of a leg whose start is not held
   * here (it was applied as it came, before holding began).
   */
  add(event: DispatchEvent): boolean {
    const pending = this.#byRequest.get(event.requestId);
    if (event.type === 'start') {
      if (pending === undefined) this.#byRequest.set(event.requestId, { events: [event], open: 1 });
      else {
        pending.events.push(event);
        pending.open++;
      }
      return true;
    }
    if (pending === undefined || !holdsOpenLeg(pending, event)) return false;
    if (--pending.open === 0) this.#byRequest.delete(event.requestId);
    // Its latency was applied already; the event itself may be on its way to NATS, so it is copied, not changed.
    else pending.events.push(event.ttftMs === undefined && event.tpotMs === undefined ? event : withoutLatency(event));
    return true;
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
