import { createInbox, type Msg, type NatsConnection, type Subscription } from '@nats-io/transport-node';

interface Pending {
  readonly resolve: (seq: number) => void;
  readonly reject: (err: Error) => void;
  readonly deadline: number;
}

/** A failed JetStream publish: no stream answered (503), the stream refused it, or no answer in time. */
export class JetStreamPublishError extends Error {
  /** 503 for "no responders" and "JetStream temporarily unavailable"; otherwise the refusal's HTTP-like code. */
  readonly status: number | undefined;
  /** The JetStream API error code of a refusal (`err_code`, e.g. 10071 wrong last sequence). */
  readonly apiCode: number | undefined;
  constructor(name: string, message: string, status?: number, apiCode?: number) {
    super(message);
    this.name = name;
    this.status = status;
    this.apiCode = apiCode;
  }
}

const decoder = new TextDecoder();

/**
 * Acknowledged JetStream publishes (a KV put is one: a message on `$KV.<bucket>.<key>` stored by the bucket's
 * stream, which answers with its sequence), without nats.js's request machinery. A nats.js request allocates a
 * random token, a timer and, on every answer, an Error with a captured stack (it rejects its already-resolved
 * promise with a "cancelled" RequestError); at a pod-watcher's thousands of puts a second that was a tenth of
 * its CPU. Here every publish of a connection shares one wildcard inbox subscription, answers are matched by a
 * counter in the reply subject, and deadlines are swept by one timer. Errors carry the names and statuses
 * `retryJetStream` recognises (TimeoutError, 503, the API error code).
 */
export class JetStreamPublisher {
  readonly #nc: NatsConnection;
  readonly #timeoutMs: number;
  readonly #pending = new Map<number, Pending>();
  #prefix = '';
  #sub: Subscription | undefined;
  #sweep: NodeJS.Timeout | undefined;
  #next = 0;

  constructor(nc: NatsConnection, options: { timeoutMs?: number } = {}) {
    this.#nc = nc;
    this.#timeoutMs = options.timeoutMs ?? 5000;
  }

  /** Publishes `data` on `subject` and resolves to the stream sequence it was stored at. */
  publish(subject: string, data: Uint8Array): Promise<number> {
    if (this.#sub === undefined) this.#listen();
    const id = ++this.#next;
    return new Promise<number>((resolve, reject) => {
      this.#pending.set(id, { resolve, reject, deadline: Date.now() + this.#timeoutMs });
      try {
        this.#nc.publish(subject, data, { reply: `${this.#prefix}${id}` });
      } catch (err) {
        // Closed or draining connection, or an invalid subject: nothing was sent.
        this.#pending.delete(id);
        reject(err);
      }
    });
  }

  /** Requests waiting for their acknowledgement. */
  get inFlight(): number {
    return this.#pending.size;
  }

  #listen(): void {
    this.#prefix = `${createInbox()}.`;
    const sub = this.#nc.subscribe(`${this.#prefix}*`, { callback: (_err, msg) => this.#answer(msg) });
    this.#sub = sub;
    void sub.closed.then(
      () => this.#rejectAll('the connection closed'),
      () => this.#rejectAll('the connection closed'),
    );
    const every = Math.max(50, Math.min(500, this.#timeoutMs / 4));
    this.#sweep = setInterval(() => this.#expire(Date.now()), every);
    this.#sweep.unref();
  }

  #answer(msg: Msg): void {
    const id = Number(msg.subject.slice(this.#prefix.length));
    const p = this.#pending.get(id);
    if (p === undefined) return; // answered after its deadline
    this.#pending.delete(id);
    if (msg.headers?.code === 503 || (msg.data.length === 0 && msg.headers?.hasError)) {
      p.reject(new JetStreamPublishError('JetStreamPublishError', 'no responders: no stream stores this subject yet', 503));
      return;
    }
    let ack: { seq?: unknown; error?: { code?: number; err_code?: number; description?: string } };
    try {
      ack = JSON.parse(decoder.decode(msg.data)) as typeof ack;
    } catch {
      p.reject(new JetStreamPublishError('JetStreamPublishError', 'invalid publish acknowledgement'));
      return;
    }
    if (ack.error) {
      p.reject(
        new JetStreamPublishError('JetStreamApiError', ack.error.description ?? 'publish refused', ack.error.code, ack.error.err_code),
      );
      return;
    }
    if (typeof ack.seq !== 'number') {
      p.reject(new JetStreamPublishError('JetStreamPublishError', 'invalid publish acknowledgement'));
      return;
    }
    p.resolve(ack.seq);
  }

  #expire(now: number): void {
    // Insertion order is deadline order (one timeout for all): the first one not due ends the sweep.
    for (const [id, p] of this.#pending) {
      if (p.deadline > now) break;
      this.#pending.delete(id);
      p.reject(new JetStreamPublishError('TimeoutError', `timeout: no publish acknowledgement within ${this.#timeoutMs} ms`));
    }
  }

  #rejectAll(why: string): void {
    clearInterval(this.#sweep);
    for (const p of this.#pending.values()) p.reject(new JetStreamPublishError('ClosedConnectionError', why));
    this.#pending.clear();
  }
}
