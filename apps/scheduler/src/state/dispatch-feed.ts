import { DispatchBatchSchema, Subjects } from '@triad/bus';
import type { Bus } from '@triad/bus/client';
import type { InflightTracker } from '@triad/scheduling';

/** How often gateways that stopped sending snapshots are looked for, even when no request arrives. */
const EXPIRY_SWEEP_MS = 500;

/**
 * Feeds every gateway's dispatch batches into the in-flight tracker. Every replica subscribes without a queue
 * group, so all of them hold the same counts whichever replica answers a request.
 */
export function startDispatchFeed(bus: Bus, tracker: InflightTracker): { stop(): void } {
  const sub = bus.subscribe(Subjects.dispatch, DispatchBatchSchema, (batch) => tracker.applyBatch(batch, Date.now()));
  const sweep = setInterval(() => tracker.expire(Date.now()), EXPIRY_SWEEP_MS);
  sweep.unref();
  return {
    stop: () => {
      clearInterval(sweep);
      sub.unsubscribe();
    },
  };
}
