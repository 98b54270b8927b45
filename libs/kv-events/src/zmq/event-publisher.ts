import type { Publisher, Router } from 'zeromq';
import { zmq } from './zmq-module';
import { END_OF_REPLAY, readSeq, seqBytes } from './frames';

export interface EventPublisherOptions {
  /** PUB bind address, e.g. `tcp://127.0.0.1:5557` (port 0 is not allowed by libzmq; use `tcp://127.0.0.1:*`). */
  readonly endpoint: string;
  /** ROUTER bind address for replay requests; none disables replay. */
  readonly replayEndpoint?: string | undefined;
  readonly topic?: string;
  /** Batches kept for replay (vLLM `buffer_steps`, default 10 000). */
  readonly bufferSteps?: number;
}

/**
 * The engine side of KV events, as vLLM's and SGLang's `ZmqEventPublisher` behave: each payload goes out as
 * `(topic, seq, payload)` on a PUB socket with seq counting from 0, the last `bufferSteps` payloads are kept, and
 * a ROUTER answers `(identity, "", start_seq)` with every kept batch from `start_seq` on and a `-1` end marker.
 * Used by the simulated engines and the tests.
 */
export class ZmqEventPublisher {
  readonly #pub: Publisher;
  readonly #router: Router | undefined;
  readonly #topic: Buffer;
  readonly #limit: number;
  readonly #buffer: { seq: number; payload: Buffer }[] = [];
  #next = 0;
  #sending: Promise<void> = Promise.resolve();
  endpoint = '';
  replayEndpoint: string | undefined;

  private constructor(options: EventPublisherOptions) {
    this.#pub = new (zmq().Publisher)({ linger: 0, sendHighWaterMark: 100_000 });
    this.#router = options.replayEndpoint ? new (zmq().Router)({ linger: 0 }) : undefined;
    this.#topic = Buffer.from(options.topic ?? '', 'utf8');
    this.#limit = options.bufferSteps ?? 10_000;
  }

  static async start(options: EventPublisherOptions): Promise<ZmqEventPublisher> {
    const p = new ZmqEventPublisher(options);
    await p.#pub.bind(options.endpoint);
    p.endpoint = p.#pub.lastEndpoint ?? options.endpoint;
    if (p.#router && options.replayEndpoint) {
      await p.#router.bind(options.replayEndpoint);
      p.replayEndpoint = p.#router.lastEndpoint ?? options.replayEndpoint;
      void p.#serveReplays(p.#router);
    }
    return p;
  }

  /** Sequence number the next batch gets. */
  get nextSeq(): number {
    return this.#next;
  }

  /**
   * Publishes one encoded batch; resolves when it is queued. Sends are serialized (libzmq allows one at a time).
   * `lose` keeps the batch for replay without sending it: a message the transport lost (gap tests, simulations).
   */
  publish(payload: Uint8Array, opts: { lose?: boolean } = {}): Promise<void> {
    const seq = this.#next++;
    const buf = Buffer.from(payload.buffer, payload.byteOffset, payload.length);
    this.#buffer.push({ seq, payload: buf });
    if (this.#buffer.length > this.#limit) this.#buffer.shift();
    if (opts.lose) return this.#sending;
    this.#sending = this.#sending.then(() => this.#pub.send([this.#topic, seqBytes(seq), buf])).catch(() => undefined);
    return this.#sending;
  }

  /** Sends raw frames as they are (tests of malformed input). */
  sendRaw(frames: (Buffer | string)[]): Promise<void> {
    this.#sending = this.#sending.then(() => this.#pub.send(frames)).catch(() => undefined);
    return this.#sending;
  }

  /** Forgets the sequence and the replay buffer, as a restarted engine process does. */
  resetSequence(): void {
    this.#next = 0;
    this.#buffer.length = 0;
  }

  async #serveReplays(router: Router): Promise<void> {
    try {
      for await (const frames of router) {
        const [identity, , start] = frames;
        const from = readSeq(start);
        if (frames.length !== 3 || identity === undefined || from === undefined) continue;
        for (const { seq, payload } of this.#buffer) {
          if (seq >= from) await router.send([identity, '', seqBytes(seq), payload]);
        }
        await router.send([identity, '', seqBytes(END_OF_REPLAY), '']);
      }
    } catch {
      // closed
    }
  }

  async close(): Promise<void> {
    await this.#sending;
    this.#pub.close();
    this.#router?.close();
  }
}
