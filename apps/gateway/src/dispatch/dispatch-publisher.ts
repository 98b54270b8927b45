import type { NatsConnection } from '@nats-io/transport-node';
import { SCHEMA_VERSION, Subjects, type DispatchBatchMessage, type DispatchEvent, type PackedLegCode, type Stage } from '@triad/bus';
import type { TurnFlushable, TurnFlusher } from '../nats/turn-flusher';

const encoder = new TextEncoder();

function publishSnapshot(publisher: DispatchPublisher): void {
  publisher.snapshot();
}

function windowElapsed(publisher: DispatchPublisher): void {
  publisher.windowElapsed();
}

/** What the gateway measured on a finished leg (shared so schedulers can score endpoints by it). */
export interface LegLatency {
  ttftMs: number;
  tpotMs?: number;
}

/** A packed leg's code by the event's type and stage (`PackedLegCodes` in `@triad/bus`). */
const LEG_CODES: Readonly<Record<DispatchEvent['type'], Readonly<Record<Stage, PackedLegCode>>>> = {
  start: { aggregated: 'sa', encode: 'se', prefill: 'sp', decode: 'sd' },
  finish: { aggregated: 'fa', encode: 'fe', prefill: 'fp', decode: 'fd' },
};

/** What a string needs no escape for in JSON: no control character, quote, backslash or surrogate. */
// eslint-disable-next-line no-control-regex -- finding control characters is this pattern's job
const PLAIN_STRING = /^[^"\\\u0000-\u001f\ud800-\udfff]*$/;

/** `JSON.stringify(s)`, without the call where nothing needs escaping (request ids, endpoint keys). */
const jsonString = (s: string): string => (PLAIN_STRING.test(s) ? `"${s}"` : JSON.stringify(s));

/**
 * What a packed leg carries after its time: a start's input tokens, a finish's TTFT and TPOT (`${n}` writes a finite
 * number as `JSON.stringify` does; a latency that is not finite is left out, as no reader would take it).
 */
function legTail(event: DispatchEvent): string {
  if (event.type === 'start') return event.inputTokens === undefined ? '' : `,${event.inputTokens}`;
  const { ttftMs, tpotMs } = event;
  if (ttftMs === undefined || !Number.isFinite(ttftMs)) return '';
  return tpotMs === undefined || !Number.isFinite(tpotMs) ? `,${ttftMs}` : `,${ttftMs},${tpotMs}`;
}

/**
 * How events go on the wire: `packed` (the batch's `packed` legs, about a seventh of the bytes) or `events` (one
 * object per event, the form schedulers from before `packed` read; for a rolling upgrade that replaces the gateways
 * before the schedulers).
 */
export type DispatchWire = 'packed' | 'events';

/** Events in one message at most before it goes out without waiting for the window. */
const MAX_EVENTS_PER_MESSAGE = 512;

export interface DispatchPublisherOptions {
  /** Full in-flight snapshot period. */
  readonly snapshotIntervalMs: number;
  /**
   * How long an event may wait for company (0: it goes out at the end of its event-loop turn). Events also leave
   * early with the next scheduling batch, in the same socket write.
   */
  readonly flushWindowMs?: number;
  /** How events are written (default `packed`). */
  readonly wire?: DispatchWire;
}

/**
 * Publishes this gateway's dispatch start/finish events on `triad.v1.dispatch`, plus a full in-flight snapshot
 * every `snapshotIntervalMs` (schedulers replace their view of this gateway with it, healing lost events). Every
 * event is also handed to `onEvent` (the local fallback's in-flight tracker) at once.
 *
 * Events are coalesced: with `flushWindowMs` 0, into one message per event-loop turn; otherwise an event waits
 * up to the window for the others (an EPD request makes four turns of events: at low load, four messages, each a
 * socket write here, a delivery by nats-server and a wake-up of every scheduler replica), and whatever is pending
 * rides along with the next scheduling batch in the same write. Schedulers then see a leg up to the window late,
 * far inside the snapshot period they already tolerate.
 */
export class DispatchPublisher implements TurnFlushable {
  readonly #nc: NatsConnection;
  readonly #gateway: string;
  readonly #intervalMs: number;
  readonly #onEvent: ((event: DispatchEvent) => void) | undefined;
  readonly #inflight = new Map<string, number>();
  readonly #turn: TurnFlusher;
  #events: DispatchEvent[] = [];
  /** Other NATS sends waiting for the next flush (the fallback's affinity records), in the same socket write. */
  #riders: (() => void)[] = [];
  #seq = 0;
  #timer: NodeJS.Timeout | undefined;
  readonly #windowMs: number;
  #window: NodeJS.Timeout | undefined;
  readonly #packed: boolean;
  /** A packed batch's text up to its `seq`. */
  readonly #head: string;
  /** Index of each request id and endpoint key in the message being packed (cleared after each). */
  readonly #requestIndex = new Map<string, number>();
  readonly #endpointIndex = new Map<string, number>();

  constructor(
    nc: NatsConnection,
    gateway: string,
    options: DispatchPublisherOptions,
    turn: TurnFlusher,
    onEvent?: (event: DispatchEvent) => void,
  ) {
    this.#nc = nc;
    this.#gateway = gateway;
    this.#intervalMs = options.snapshotIntervalMs;
    this.#windowMs = options.flushWindowMs ?? 0;
    this.#packed = (options.wire ?? 'packed') === 'packed';
    this.#head = `{"v":${SCHEMA_VERSION},"gateway":${jsonString(gateway)},"seq":`;
    this.#turn = turn;
    this.#onEvent = onEvent;
    turn.add(this);
  }

  /** Starts the periodic snapshots (the first goes out at once, so schedulers learn of this gateway). */
  start(): void {
    this.snapshot();
    this.#timer = setInterval(publishSnapshot, this.#intervalMs, this);
    this.#timer.unref();
  }

  /** In-flight legs per endpoint key right now. */
  get inflight(): ReadonlyMap<string, number> {
    return this.#inflight;
  }

  started(requestId: string, endpoint: string, stage: Stage, inputTokens: number | undefined): void {
    this.#inflight.set(endpoint, (this.#inflight.get(endpoint) ?? 0) + 1);
    const event: DispatchEvent = { type: 'start', requestId, endpoint, stage, at: Date.now() };
    if (inputTokens !== undefined) event.inputTokens = inputTokens;
    this.#push(event);
  }

  finished(requestId: string, endpoint: string, stage: Stage, ok: boolean, outputTokens: number | undefined, latency?: LegLatency): void {
    const n = (this.#inflight.get(endpoint) ?? 1) - 1;
    if (n > 0) this.#inflight.set(endpoint, n);
    else this.#inflight.delete(endpoint);
    const event: DispatchEvent = { type: 'finish', requestId, endpoint, stage, at: Date.now(), ok };
    if (outputTokens !== undefined) event.outputTokens = outputTokens;
    if (latency !== undefined) {
      event.ttftMs = Math.round(latency.ttftMs * 10) / 10;
      if (latency.tpotMs !== undefined) event.tpotMs = Math.round(latency.tpotMs * 100) / 100;
    }
    this.#push(event);
  }

  /**
   * Runs `send` with the next flush of the events (when their window ends, or with the next scheduling batch), so
   * what it publishes shares their socket write and their coalescing: the in-process scheduler's affinity records,
   * one message per window instead of one per decision.
   */
  alongside(send: () => void): void {
    const idle = this.#events.length === 0 && this.#riders.length === 0;
    this.#riders.push(send);
    if (idle) this.#startWindow();
  }

  #push(event: DispatchEvent): void {
    this.#onEvent?.(event);
    const first = this.#events.length === 0 && this.#riders.length === 0;
    this.#events.push(event);
    if (first) this.#startWindow();
    else if (this.#events.length === MAX_EVENTS_PER_MESSAGE) this.#turn.requestAfterWrites();
  }

  /** The first thing pending: it waits for the window (without one, for the end of this turn). */
  #startWindow(): void {
    if (this.#windowMs > 0) {
      this.#window = setTimeout(windowElapsed, this.#windowMs, this);
      this.#window.unref();
      return;
    }
    // After the legs undici writes at the end of this turn (TurnFlusher): the event's socket write never delays
    // a leg's, including the next leg started in the same turn as this event (a finish, then the next stage).
    this.#turn.requestAfterWrites();
  }

  /** @internal The flush window of the pending events ended: they go out after this turn's leg writes. */
  windowElapsed(): void {
    this.#window = undefined;
    this.#turn.requestAfterWrites();
  }

  flushTurn(): void {
    // Every turn flush publishes what is pending: when it is not the window's, it is a scheduling batch going
    // out, and the events join its socket write.
    this.flush();
  }

  /** Publishes the events gathered in this turn. */
  flush(): void {
    if (this.#window !== undefined) {
      clearTimeout(this.#window);
      this.#window = undefined;
    }
    if (this.#riders.length > 0) {
      const riders = this.#riders;
      this.#riders = [];
      for (const send of riders) send();
    }
    if (this.#events.length === 0 || this.#nc.isClosed()) return;
    const events = this.#events;
    this.#events = [];
    if (this.#packed) this.#send(this.#packedText(events));
    else this.#publish({ v: SCHEMA_VERSION, gateway: this.#gateway, seq: this.#seq++, events });
  }

  /**
   * The batch of `events` as `packed` legs, written by hand (the shape is fixed; each request id and endpoint key
   * written once, times from the first event's).
   */
  #packedText(events: readonly DispatchEvent[]): string {
    const at = events[0].at;
    let requests = '';
    let endpoints = '';
    let legs = '';
    let nextRequest = 0;
    let nextEndpoint = 0;
    const requestIndex = this.#requestIndex;
    const endpointIndex = this.#endpointIndex;
    for (let i = 0; i < events.length; i++) {
      const event = events[i];
      let r = requestIndex.get(event.requestId);
      if (r === undefined) {
        r = nextRequest++;
        requestIndex.set(event.requestId, r);
        requests += r === 0 ? jsonString(event.requestId) : `,${jsonString(event.requestId)}`;
      }
      let e = endpointIndex.get(event.endpoint);
      if (e === undefined) {
        e = nextEndpoint++;
        endpointIndex.set(event.endpoint, e);
        endpoints += e === 0 ? jsonString(event.endpoint) : `,${jsonString(event.endpoint)}`;
      }
      legs += `${i === 0 ? '' : ','}["${LEG_CODES[event.type][event.stage]}",${r},${e},${event.at - at}${legTail(event)}]`;
    }
    requestIndex.clear();
    endpointIndex.clear();
    return `${this.#head}${this.#seq++},"events":[],"packed":{"at":${at},"requests":[${requests}],"endpoints":[${endpoints}],"legs":[${legs}]}}`;
  }

  /** Publishes pending events and then the full in-flight snapshot. */
  snapshot(): void {
    this.flush();
    if (this.#nc.isClosed()) return;
    this.#publish({
      v: SCHEMA_VERSION,
      gateway: this.#gateway,
      seq: this.#seq++,
      events: [],
      inflight: Object.fromEntries(this.#inflight),
      snapshotIntervalMs: this.#intervalMs,
    });
  }

  #publish(batch: DispatchBatchMessage): void {
    this.#send(JSON.stringify(batch));
  }

  #send(json: string): void {
    try {
      this.#nc.publish(Subjects.dispatch, encoder.encode(json));
    } catch {
      // A closed or reconnecting connection drops the batch; the next snapshot heals the schedulers' counts.
    }
  }

  stop(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
    this.flush();
  }
}
