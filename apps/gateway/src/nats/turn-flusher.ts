import { afterLegWrites } from '@triad/connectors';

/** Something that sends what it gathered during this event-loop turn. */
export interface TurnFlushable {
  flushTurn(): void;
}

function runTurn(flusher: TurnFlusher): void {
  flusher.run();
}

function afterTurnWrites(flusher: TurnFlusher): void {
  afterLegWrites(flusher.runDeferred);
}

/**
 * Runs the gateway's NATS senders once at the end of an event-loop turn (setImmediate: after the turn's I/O
 * callbacks, no timer delay), all in the same callback. nats.js writes its outbound buffer on the microtask
 * after a publish, so one callback means one socket write for the turn's scheduling batch and dispatch events
 * together — each write is a syscall, and at EPD rates they were a fifth of the gateway's CPU.
 *
 * A scheduling batch (`request`) goes out in this turn's check phase. What only informs others (dispatch events:
 * `requestAfterWrites`) goes out after the legs dispatched so far are written (`afterLegWrites`): undici writes a
 * leg on a kept-alive socket from its own setImmediate (its idle-socket check), queued when the leg is
 * dispatched, and an event pushed earlier in the same turn (the previous leg's finish, a flush window that ended)
 * would otherwise be written first. On a busy machine that write wakes nats-server and its subscribers, and the
 * gateway could lose its core before the leg's write: measured at 1 connection on the 2-core VM, the encode leg's
 * write waited a median 0.7–1.1 ms behind it (docs/performance.md).
 */
export class TurnFlusher {
  readonly #members: TurnFlushable[] = [];
  #pending = false;
  #deferred = false;

  add(member: TurnFlushable): void {
    this.#members.push(member);
  }

  /** Asks for a flush at the end of this turn (idempotent within a turn). */
  request(): void {
    if (this.#pending) return;
    this.#pending = true;
    setImmediate(runTurn, this);
  }

  /** Asks for a flush at the end of this turn once the legs dispatched so far are written. */
  requestAfterWrites(): void {
    if (this.#pending || this.#deferred) return;
    this.#deferred = true;
    setImmediate(afterTurnWrites, this);
  }

  /** @internal The deferred flush: nothing waits for a leg's write any more. */
  readonly runDeferred = (): void => {
    this.#deferred = false;
    // A scheduling batch asked for since takes everything in its own flush.
    if (!this.#pending) this.run();
  };

  run(): void {
    this.#pending = false;
    for (const m of this.#members) m.flushTurn();
  }
}
