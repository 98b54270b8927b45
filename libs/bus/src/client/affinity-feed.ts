import { AffinityBatchSchema, type AffinityRecord } from '../affinity';
import { readAffinityBatch } from '../affinity-read';
import { Subjects } from '../names';
import { SCHEMA_VERSION } from '../records';
import type { Bus } from './bus';

/** What applies other replicas' affinity records (the scheduling lib's `Scheduler.learn`). */
export interface AffinitySink {
  learn(record: AffinityRecord): void;
}

/** Publishes this replica's records and applies the others'. */
export interface AffinityFeed {
  /** Queues a record this replica learned; the queue goes out as one message when `flush` says. */
  publish(record: AffinityRecord): void;
  /** Sends what is queued (a window's records leave before the replica closes). */
  stop(): void;
}

const MAX_RECORDS_PER_MESSAGE = 4096;

/**
 * Shares affinity state over `triad.v1.affinity`: every subscriber (each scheduler replica, each gateway's local
 * scheduler) publishes what its decisions taught and applies what the others' taught, skipping its own `origin`.
 * No queue group: all replicas converge on the same prefix, encoder-cache and session tables, so adding a replica
 * or failing over to a gateway's fallback does not lower hit ratios.
 */
export interface AffinityFeedOptions {
  readonly origin: string;
  /**
   * When the records queued in a turn go out: `immediate` (default), after the turn's I/O; `microtask`, as soon
   * as the code that queued them returns: a scheduler's records then share the socket write of the reply to the
   * batch that taught them (one write and one delivery per batch, not two); a function, called once per turn
   * with the send, which runs it when it chooses (a gateway's, after the legs undici writes from immediates of
   * its own, queued after the decision that taught the records); `{ windowMs }`, a coalescing window for a
   * scheduler: the first record queued opens it, and the records leave together, on a microtask, with the first
   * record queued once it has lasted `windowMs`, i.e. in the socket write of the reply to that batch (one message
   * per window instead of one per batch, each of which woke nats-server and every subscriber, and no write of
   * their own); when no decision comes, after `maxWaitMs` (default 5 × `windowMs`) on a timer.
   */
  readonly flush?: 'immediate' | 'microtask' | ((send: () => void) => void) | AffinityWindow;
  /**
   * When the others' records are decoded and applied: at once (default), or when this function runs its callback
   * (a gateway's, after the legs of the turn are written: the scheduler's records ride in the socket write of its
   * reply to a scheduling batch, and were decoded and applied before the request the reply answered could go on).
   */
  readonly receive?: (apply: () => void) => void;
}

export interface AffinityWindow {
  readonly windowMs: number;
  readonly maxWaitMs?: number;
}

export function startAffinityFeed(bus: Bus, sink: AffinitySink, options: AffinityFeedOptions): AffinityFeed {
  const origin = options.origin;
  const sub = bus.subscribe(
    Subjects.affinity,
    AffinityBatchSchema,
    (batch) => {
      if (batch.origin === origin) return;
      for (const record of batch.records) sink.learn(record);
    },
    // Read by hand: the schema (zod) was most of the cost of a gateway's read of the scheduler's records.
    options.receive === undefined ? { read: readAffinityBatch } : { defer: options.receive, read: readAffinityBatch },
  );
  let queue: AffinityRecord[] = [];
  let scheduled = false;
  let stopped = false;
  const coalesce = typeof options.flush === 'object' ? options.flush : undefined;
  const maxWaitMs = coalesce === undefined ? 0 : (coalesce.maxWaitMs ?? 5 * coalesce.windowMs);
  /** When the open window's first record was queued. */
  let openedAt = 0;
  /**
   * The timer that sends a window no later record sends. Left armed when a record sends the window (a timer made and
   * cleared per window was most of the feed's own cost besides the JSON); when it fires, it sends the window open
   * then if that one has lasted `maxWaitMs`, waits for the rest of its time if not, and disarms with none open.
   */
  let backstop: NodeJS.Timeout | undefined;
  const armBackstop = (ms: number): void => {
    backstop = setTimeout(backstopFired, ms);
    backstop.unref();
  };
  const backstopFired = (): void => {
    backstop = undefined;
    if (stopped || queue.length === 0) return;
    const left = openedAt + maxWaitMs - Date.now();
    // Timers count whole milliseconds: within one of its time, the window has lasted it.
    if (left <= 1) flush();
    else armBackstop(left);
  };
  const flush = (): void => {
    scheduled = false;
    if (stopped || bus.nc.isClosed()) {
      queue = [];
      return;
    }
    while (queue.length > 0) {
      const records = queue.length <= MAX_RECORDS_PER_MESSAGE ? queue : queue.slice(0, MAX_RECORDS_PER_MESSAGE);
      queue = queue.length <= MAX_RECORDS_PER_MESSAGE ? [] : queue.slice(MAX_RECORDS_PER_MESSAGE);
      bus.publish(Subjects.affinity, AffinityBatchSchema, { v: SCHEMA_VERSION, origin, records });
    }
  };
  return {
    publish: (record) => {
      if (stopped) return;
      queue.push(record);
      if (scheduled) return;
      if (coalesce !== undefined) {
        const now = Date.now();
        if (queue.length === 1) {
          openedAt = now;
          if (backstop === undefined) armBackstop(maxWaitMs);
        } else if (now - openedAt >= coalesce.windowMs) {
          scheduled = true;
          queueMicrotask(flush);
        }
        return;
      }
      scheduled = true;
      const when = options.flush;
      if (when === 'microtask') queueMicrotask(flush);
      else if (typeof when === 'function') when(flush);
      else setImmediate(flush);
    },
    stop: () => {
      if (stopped) return;
      // A window's records leave before the replica closes.
      if (coalesce !== undefined && queue.length > 0) flush();
      if (backstop !== undefined) clearTimeout(backstop);
      stopped = true;
      sub.unsubscribe();
    },
  };
}
