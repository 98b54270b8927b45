import { DispatchBatchSchema, type DispatchBatch } from '../dispatch';
import { readDispatchBatch } from '../dispatch-read';
import { Subjects } from '../names';
import type { Bus } from './bus';

/** What keeps in-flight counts from the dispatch feed (the scheduling lib's `InflightTracker`). */
export interface DispatchSink {
  applyBatch(batch: DispatchBatch, now: number): void;
  /** Drops gateways whose snapshots stopped. */
  expire(now: number): unknown;
}

export interface DispatchFeedOptions {
  /** A gateway whose batches are skipped: a gateway feeding its own events to `sink` directly. */
  readonly ignoreGateway?: string;
  /** How often gateways that stopped sending snapshots are looked for, even when no batch arrives. */
  readonly sweepMs?: number;
}

/**
 * Feeds every gateway's `triad.v1.dispatch` batches into `sink`. No queue group: every subscriber (each scheduler
 * replica, each in-process-scheduling gateway) holds the same counts.
 */
export function startDispatchFeed(bus: Bus, sink: DispatchSink, options: DispatchFeedOptions = {}): { stop(): void } {
  const ignore = options.ignoreGateway;
  // Read by hand (zod was about 6 % of a scheduler replica's CPU at one batch per request); the schema still
  // reads and explains what the hand reader does not take.
  const sub = bus.subscribe(
    Subjects.dispatch,
    DispatchBatchSchema,
    (batch) => {
      if (batch.gateway !== ignore) sink.applyBatch(batch, Date.now());
    },
    { read: readDispatchBatch },
  );
  const sweep = setInterval(() => sink.expire(Date.now()), options.sweepMs ?? 500);
  sweep.unref();
  return {
    stop: () => {
      clearInterval(sweep);
      sub.unsubscribe();
    },
  };
}
