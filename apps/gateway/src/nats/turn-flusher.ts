/** Something that sends what it gathered during this event-loop turn. */
export interface TurnFlushable {
  flushTurn(): void;
}

function runTurn(flusher: TurnFlusher): void {
  flusher.run();
}

/**
 * Runs the gateway's NATS senders once at the end of an event-loop turn (setImmediate: after the turn's I/O
 * callbacks, no timer delay), all in the same callback. nats.js writes its outbound buffer on the microtask
 * after a publish, so one callback means one socket write for the turn's scheduling batch and dispatch events
 * together — each write is a syscall, and at EPD rates they were a fifth of the gateway's CPU.
 */
export class TurnFlusher {
  readonly #members: TurnFlushable[] = [];
  #pending = false;

  add(member: TurnFlushable): void {
    this.#members.push(member);
  }

  /** Asks for a flush at the end of this turn (idempotent within a turn). */
  request(): void {
    if (this.#pending) return;
    this.#pending = true;
    setImmediate(runTurn, this);
  }

  run(): void {
    this.#pending = false;
    for (const m of this.#members) m.flushTurn();
  }
}
