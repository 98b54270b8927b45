import type { Dealer, Subscriber } from 'zeromq';
import { zmq } from './zmq-module';
import { END_OF_REPLAY, readSeq, seqBytes } from './frames';

/** One message of an engine's event socket: `(topic, seq, payload)` multipart, as ZmqEventPublisher sends it. */
export interface StreamMessage {
  readonly topic: string;
  readonly seq: number;
  readonly payload: Buffer;
}

export interface EventStreamHandlers {
  onMessage(msg: StreamMessage): void;
  /** A message that is not three frames with an 8-byte sequence; `why` says what is wrong. */
  onMalformed(why: string): void;
  /** The TCP connection came up (`true`) or went down (`false`). */
  onConnection(up: boolean): void;
}

export interface EventStreamOptions {
  readonly endpoint: string;
  readonly replayEndpoint?: string | undefined;
  /** Subscription prefix (the engine's `topic`, '' for all). */
  readonly topic?: string;
  /** Most messages libzmq queues for us before it drops (bounds memory under a flood). */
  readonly receiveHighWaterMark?: number;
  readonly reconnectIntervalMs?: number;
}

/** Answer of a replay request: the buffered batches from the requested sequence on, oldest first. */
export type ReplayResult = { ok: true; messages: { seq: number; payload: Buffer }[] } | { ok: false; reason: string };

/**
 * A SUB socket connected to one engine's KV-event PUB socket, plus a DEALER for its replay ROUTER. libzmq
 * reconnects on its own; connection changes are reported through the socket monitor.
 */
export class EventStream {
  readonly #sub: Subscriber;
  readonly #options: EventStreamOptions;
  #dealer: Dealer | undefined;
  #replaying: Promise<ReplayResult> | undefined;
  #closed = false;

  constructor(options: EventStreamOptions, handlers: EventStreamHandlers) {
    this.#options = options;
    this.#sub = new (zmq().Subscriber)({
      receiveHighWaterMark: options.receiveHighWaterMark ?? 10_000,
      reconnectInterval: options.reconnectIntervalMs ?? 500,
      reconnectMaxInterval: 5_000,
      linger: 0,
    });
    void this.#watch(handlers);
    this.#sub.subscribe(options.topic ?? '');
    this.#sub.connect(options.endpoint);
    void this.#read(handlers);
  }

  /**
   * Connection changes from the socket monitor, read as an async iterator: zeromq's event-emitter mode loads Node's
   * `events` lazily through the require of whoever loaded zeromq first, which is gone in a later jest test file.
   */
  async #watch(handlers: EventStreamHandlers): Promise<void> {
    try {
      for await (const event of this.#sub.events) {
        if (event.type === 'connect') handlers.onConnection(true);
        else if (event.type === 'disconnect') handlers.onConnection(false);
      }
    } catch {
      // the socket closed
    }
  }

  async #read(handlers: EventStreamHandlers): Promise<void> {
    try {
      for await (const frames of this.#sub) {
        if (frames.length !== 3) {
          handlers.onMalformed(`message has ${frames.length} frames, expected 3 (topic, seq, payload)`);
          continue;
        }
        const seq = readSeq(frames[1]);
        if (seq === undefined || seq < 0) {
          handlers.onMalformed('sequence frame is not an 8-byte unsigned integer');
          continue;
        }
        handlers.onMessage({ topic: frames[0].toString('utf8'), seq, payload: frames[2] });
      }
    } catch (err) {
      if (!this.#closed) handlers.onMalformed(`subscriber stopped: ${(err as Error).message}`);
    }
  }

  get canReplay(): boolean {
    return this.#options.replayEndpoint !== undefined;
  }

  /**
   * Asks the replay ROUTER for every buffered batch from `fromSeq` on: sends `("", seq)` and reads `("", seq,
   * payload)` frames until the `-1` end marker. One request at a time; a second call shares the first's answer.
   */
  replay(fromSeq: number, timeoutMs = 2_000): Promise<ReplayResult> {
    if (!this.#options.replayEndpoint) return Promise.resolve({ ok: false, reason: 'no replay endpoint' });
    this.#replaying ??= this.#doReplay(fromSeq, timeoutMs).finally(() => (this.#replaying = undefined));
    return this.#replaying;
  }

  async #doReplay(fromSeq: number, timeoutMs: number): Promise<ReplayResult> {
    if (!this.#dealer) {
      this.#dealer = new (zmq().Dealer)({ linger: 0, receiveTimeout: timeoutMs, sendTimeout: timeoutMs });
      this.#dealer.connect(this.#options.replayEndpoint as string);
    }
    const dealer = this.#dealer;
    const messages: { seq: number; payload: Buffer }[] = [];
    try {
      await dealer.send(['', seqBytes(fromSeq)]);
      for (;;) {
        const frames = await dealer.receive();
        const seq = readSeq(frames[1]);
        if (frames.length !== 3 || seq === undefined) return this.#failReplay('malformed replay reply');
        if (seq === END_OF_REPLAY) return { ok: true, messages };
        messages.push({ seq, payload: frames[2] });
      }
    } catch (err) {
      return this.#failReplay(`replay failed: ${(err as Error).message}`);
    }
  }

  /** A replay that failed midway leaves replies queued on the DEALER: drop it so the next request starts clean. */
  #failReplay(reason: string): ReplayResult {
    this.#dealer?.close();
    this.#dealer = undefined;
    return { ok: false, reason };
  }

  close(): void {
    this.#closed = true;
    this.#sub.close();
    this.#dealer?.close();
  }
}
