import { connect, headers as natsHeaders, type MsgHdrs, type NatsConnection, type Subscription, type Msg } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import type { z } from 'zod';
import { ErrorCode, TriadError } from '@triad/errors';
import { decodeMessage, encodeMessage, encodeText } from '../codec';
import { BucketTtlMs } from '../names';
import { retryJetStream, startUpRetry, type JetStreamRetryOptions } from './js-retry';
import { TypedKv, type TypedKvOptions } from './typed-kv';
import { JetStreamPublisher } from './js-publisher';
import { openKvBucket } from './open-kv-bucket';

/** The few logger methods the bus uses (pino-compatible), so the bus does not depend on a logging library. */
export interface BusLogger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
}

export interface BusOptions {
  readonly servers: string | readonly string[];
  /** Connection name shown by the server (`triad-gateway-<pod>`). */
  readonly name: string;
  readonly logger?: BusLogger;
  /** Keep retrying the first connection instead of failing (services that must start before NATS). */
  readonly waitOnFirstConnect?: boolean;
  /**
   * How long one connection attempt may take (default 5 s; nats.js's own default is 20 s). An address that drops
   * packets hangs rather than refuses; a caller retrying the first connection wants to hear of it sooner.
   */
  readonly connectTimeoutMs?: number;
  /**
   * JetStream replicas of the KV buckets this client creates (default 1; 3 on a 3-node cluster, so a bucket keeps
   * its data and a leader through one node's loss). An existing bucket with fewer replicas is raised to this.
   */
  readonly kvReplicas?: number;
  /**
   * The server does not deliver this connection's own publishes to its own subscriptions (NATS `no_echo`). For a
   * client that publishes on subjects it also follows and skips its own messages anyway (`triad.v1.affinity`, a
   * gateway's `triad.v1.dispatch` with in-process scheduling): each echo was a delivery write in nats-server and
   * a wake-up, a read and a schema check in the client, for a message it then dropped.
   */
  readonly noEcho?: boolean;
}

/** Plain string headers, the shape trace context propagators read and write. */
export type HeaderMap = Record<string, string>;

export interface ReceiveContext {
  readonly headers: HeaderMap | undefined;
  readonly subject: string;
}

/** What a `serve` handler gets with a request. */
export interface ServeContext extends ReceiveContext {
  /** Runs `task` once the reply is written (bookkeeping the reply does not wait for: metrics). */
  afterReply(task: () => void): void;
}

function runTask(task: () => void): void {
  task();
}

/**
 * A received message's context, read only when the handler asks: nats.js decodes the subject from bytes on first
 * read (a `TextDecoder` call) and the headers into a map, and most handlers read neither. A class, not an object
 * literal per message (a literal with getters makes its accessors per evaluation).
 */
class ReceivedMessage implements ReceiveContext {
  #headers: HeaderMap | undefined | null = null;

  constructor(readonly msg: Msg) {}

  get headers(): HeaderMap | undefined {
    if (this.#headers === null) this.#headers = fromHeaders(this.msg.headers);
    return this.#headers;
  }

  get subject(): string {
    return this.msg.subject;
  }
}

/**
 * A request being served: the handler's context and its after-reply tasks. One object per request instead of a
 * context literal and two arrow functions: under esbuild's `keepNames` (tsx, the production bundle) every arrow
 * function assigned to a name or a property is named at run time with `Object.defineProperty`, per request here.
 */
class ServedRequest extends ReceivedMessage implements ServeContext {
  /** What `afterReply` was given, in order; undefined until it is called. */
  tasks: (() => void)[] | undefined = undefined;

  afterReply(task: () => void): void {
    (this.tasks ??= []).push(task);
  }
}

function toHeaders(map: HeaderMap | undefined): MsgHdrs | undefined {
  if (!map) return undefined;
  const keys = Object.keys(map);
  if (keys.length === 0) return undefined;
  const h = natsHeaders();
  for (const k of keys) h.set(k, map[k]);
  return h;
}

function fromHeaders(h: MsgHdrs | undefined): HeaderMap | undefined {
  if (!h) return undefined;
  const out: HeaderMap = {};
  for (const k of h.keys()) out[k] = h.get(k);
  return out;
}

/**
 * A typed NATS client: every message is encoded from and validated against a zod schema of libs/bus. Invalid
 * incoming messages are counted in `rejected` (by subject or bucket) and dropped; they never throw into handlers.
 */
export class Bus {
  readonly nc: NatsConnection;
  /** Count of invalid messages received, by subject or bucket. */
  readonly rejected = new Map<string, number>();
  readonly #logger: BusLogger | undefined;
  readonly #reconnectListeners = new Set<() => void>();
  #connected = true;
  #disconnects = 0;
  #jsRetries = 0;
  /** KV puts of every bucket of this connection (one inbox subscription for all their acknowledgements). */
  #publisher: JetStreamPublisher | undefined;
  /** Buckets whose stream this connection saw serve: opening them again (a pod-watcher's full syncs) needs no probe. */
  readonly #serving = new Set<string>();
  /** Replicas of the KV buckets this client creates. */
  readonly kvReplicas: number;
  /** Retry policy of every JetStream call made through this client (KV reads and writes, bucket creation). */
  readonly jsRetry: JetStreamRetryOptions;
  /**
   * Messages of `subscribe`d subjects that arrived after a reply of `serve` was queued and before it was written,
   * and the handlers' `afterReply` tasks, in order, as pairs (a function, its argument); undefined when nothing is
   * held.
   */
  #held: unknown[] | undefined;
  readonly #releaseHeld = (): void => this.#release();

  constructor(nc: NatsConnection, logger?: BusLogger, options: { kvReplicas?: number } = {}) {
    this.nc = nc;
    this.#logger = logger;
    this.kvReplicas = options.kvReplicas ?? 1;
    this.jsRetry = {
      onRetry: (err, attempt) => {
        this.#jsRetries++;
        if (attempt === 1) this.#logger?.warn({ error: err.message }, 'JetStream call failed transiently; retrying');
      },
    };
    void this.#watchStatus();
  }

  async #watchStatus(): Promise<void> {
    for await (const s of this.nc.status()) {
      if (s.type === 'reconnect') {
        this.#connected = true;
        this.#logger?.info({ server: (s as { server?: string }).server }, 'nats reconnected');
        for (const l of this.#reconnectListeners) l();
      } else if (s.type === 'disconnect') {
        this.#connected = false;
        this.#disconnects++;
        this.#logger?.warn({ server: (s as { server?: string }).server }, 'nats disconnected');
      }
    }
  }

  /** Whether the connection is up (false from a disconnect until the reconnect, and once closed). */
  get connected(): boolean {
    return this.#connected && !this.nc.isClosed();
  }

  /** Connections lost since this client first connected. */
  get disconnects(): number {
    return this.#disconnects;
  }

  /** JetStream calls retried after a transient failure. */
  get jetStreamRetries(): number {
    return this.#jsRetries;
  }

  /** Calls `listener` after every reconnect (e.g. to republish state). Returns an unsubscribe function. */
  onReconnect(listener: () => void): () => void {
    this.#reconnectListeners.add(listener);
    return () => this.#reconnectListeners.delete(listener);
  }

  /**
   * Sends a reply, and holds the messages of `subscribe`d subjects that follow its request in the same read until
   * the reply is written. nats.js writes a connection's outbound buffer on the microtask queued by its first
   * publish, but hands every message of one socket read to its subscribers synchronously first: a scheduler
   * replica's reply waited for the `triad.v1.dispatch` batch that a gateway sends in the same write as its
   * scheduling batch (decoded and applied after the decision, about a tenth of a millisecond on the development
   * VM). The hold ends on a microtask queued after the write's, or before the next request this bus serves, so
   * every request still sees every message that arrived before it, in order.
   */
  #respondFirst(msg: Msg, data: Uint8Array): void {
    msg.respond(data);
    if (this.#held !== undefined) return;
    this.#held = [];
    queueMicrotask(this.#releaseHeld);
  }

  /** Sends a served request's reply, then holds its after-reply tasks behind it. */
  #reply(served: ServedRequest, data: Uint8Array): void {
    this.#respondFirst(served.msg, data);
    const tasks = served.tasks;
    if (tasks !== undefined) for (const task of tasks) this.#held?.push(runTask, task);
  }

  /** Delivers the held messages and runs the held tasks, in order (one that throws does not stop the others). */
  #release(): void {
    const held = this.#held;
    this.#held = undefined;
    if (held === undefined) return;
    for (let i = 0; i < held.length; i += 2) {
      try {
        (held[i] as (arg: unknown) => void)(held[i + 1]);
      } catch (err) {
        this.#logger?.warn({ err: (err as Error).message }, 'held message handler or after-reply task failed');
      }
    }
  }

  /** Records a rejected message. */
  reject(where: string, error: string): void {
    this.rejected.set(where, (this.rejected.get(where) ?? 0) + 1);
    this.#logger?.warn({ where, error }, 'rejected invalid message');
  }

  publish<S extends z.ZodType>(subject: string, schema: S, value: z.input<S>, headers?: HeaderMap): void {
    const h = toHeaders(headers);
    this.nc.publish(subject, encodeMessage(schema, value), h ? { headers: h } : undefined);
  }

  /**
   * Follows `subject`: each message is decoded, checked against `schema` and handed to `handler`. With `defer`,
   * messages are kept as they arrive and decoded and handled, in order, when `defer`'s callback runs (`defer` is
   * called once for the first message kept since the last delivery): for what is followed only in the background,
   * so its decoding waits for the work the same socket read brought on the request path.
   */
  subscribe<S extends z.ZodType>(
    subject: string,
    schema: S,
    handler: (value: z.output<S>, ctx: ReceiveContext) => void,
    opts?: {
      queue?: string;
      defer?: (deliverKept: () => void) => void;
      /** A reader of the message that spares the schema on a hot path (see `decodeMessage`). */
      read?: (raw: unknown) => z.output<S> | undefined;
    },
  ): Subscription {
    const read = opts?.read;
    const deliver = (msg: Msg): void => {
      const decoded = decodeMessage(schema, msg.data, read);
      if (!decoded.ok) {
        this.reject(subject, decoded.error);
        return;
      }
      handler(decoded.value, new ReceivedMessage(msg));
    };
    const defer = opts?.defer;
    let kept: Msg[] = [];
    const deliverKept = (): void => {
      const msgs = kept;
      kept = [];
      for (const msg of msgs) deliver(msg);
    };
    return this.nc.subscribe(subject, {
      ...(opts?.queue ? { queue: opts.queue } : {}),
      callback: (err, msg) => {
        if (err) return;
        if (defer !== undefined) {
          kept.push(msg);
          if (kept.length === 1) defer(deliverKept);
        } else if (this.#held === undefined) deliver(msg);
        else this.#held.push(deliver, msg);
      },
    });
  }

  /** Request-reply. Throws TriadError BUS_UNAVAILABLE (no responders, timeout, closed) or BUS_MESSAGE_INVALID. */
  async request<Q extends z.ZodType, R extends z.ZodType>(
    subject: string,
    requestSchema: Q,
    value: z.input<Q>,
    replySchema: R,
    opts: { timeoutMs: number; headers?: HeaderMap },
  ): Promise<z.output<R>> {
    let reply: Msg;
    try {
      const h = toHeaders(opts.headers);
      reply = await this.nc.request(subject, encodeMessage(requestSchema, value), {
        timeout: opts.timeoutMs,
        ...(h ? { headers: h } : {}),
      });
    } catch (err) {
      throw new TriadError(ErrorCode.BusUnavailable, `request on ${subject} failed: ${(err as Error).message}`, { cause: err });
    }
    const decoded = decodeMessage(replySchema, reply.data);
    if (!decoded.ok) {
      this.reject(subject, decoded.error);
      throw new TriadError(ErrorCode.BusMessageInvalid, `invalid reply on ${subject}: ${decoded.error}`);
    }
    return decoded.value;
  }

  /**
   * Answers requests on `subject`. A request that fails validation gets `onInvalid(error)` as its reply, and a
   * handler that throws gets `onError(err)`: callers always receive a typed reply, never a timeout.
   */
  serve<Q extends z.ZodType, R extends z.ZodType>(
    subject: string,
    requestSchema: Q,
    replySchema: R,
    handler: (request: z.output<Q>, ctx: ServeContext) => z.input<R> | Promise<z.input<R>>,
    opts: {
      queue?: string;
      onInvalid: (error: string) => z.input<R>;
      onError: (err: unknown) => z.input<R>;
      /** A reader of the request that spares the schema on the hot path (see `decodeMessage`). */
      read?: (raw: unknown) => z.output<Q> | undefined;
      /** A writer of the reply's JSON (the text `JSON.stringify` would give) that is cheaper on the hot path. */
      write?: (reply: z.input<R>) => string;
    },
  ): Subscription {
    const write = opts.write;
    const encode = (value: z.input<R>): Uint8Array => (write === undefined ? encodeMessage(replySchema, value) : encodeText(write(value)));
    return this.nc.subscribe(subject, {
      ...(opts.queue ? { queue: opts.queue } : {}),
      callback: (err, msg) => {
        if (err || !msg.reply) return;
        // What arrived before this request is applied before it is handled, as without the hold.
        if (this.#held !== undefined) this.#release();
        const decoded = decodeMessage(requestSchema, msg.data, opts.read);
        if (!decoded.ok) {
          this.reject(subject, decoded.error);
          this.#respondFirst(msg, encode(opts.onInvalid(decoded.error)));
          return;
        }
        // The headers are decoded (by nats.js, then into a map) only if the handler reads them: a replica that does
        // not trace does not, and it was 2–3 % of its CPU (perf, EPD).
        const served = new ServedRequest(msg);
        try {
          const result = handler(decoded.value, served);
          if (result instanceof Promise)
            result.then(
              (value) => this.#reply(served, encode(value)),
              (e: unknown) => this.#reply(served, encode(opts.onError(e))),
            );
          else this.#reply(served, encode(result));
        } catch (e) {
          this.#reply(served, encode(opts.onError(e)));
        }
      },
    });
  }

  /**
   * Opens (creating when missing) a KV bucket whose values follow `schema`, once its stream serves reads and writes
   * ({@link openKvBucket}: replicas that start together create the same buckets at the same moment). Transient
   * failures are retried until it opens (or the connection closes): services open their buckets while starting and
   * cannot go on without them.
   */
  async kv<S extends z.ZodType>(bucket: string, schema: S, opts?: TypedKvOptions): Promise<TypedKv<S>> {
    const ttlMs = opts?.ttlMs ?? BucketTtlMs[bucket];
    const kv = await openKvBucket(this.nc, bucket, {
      bucket: { history: opts?.history ?? 1, replicas: this.kvReplicas, ...(ttlMs !== undefined ? { ttl: ttlMs } : {}) },
      ...(this.jsRetry.onRetry ? { onRetry: this.jsRetry.onRetry } : {}),
      probe: !this.#serving.has(bucket),
    });
    this.#serving.add(bucket);
    // A start-up step: retried until it succeeds. The stream was just created (by this client or another), so a node
    // whose meta view lags answering "stream not found" to the replica check is retried too.
    await retryJetStream(() => this.#raiseReplicas(bucket), startUpRetry(this.jsRetry));
    this.#publisher ??= new JetStreamPublisher(this.nc);
    return new TypedKv(kv, bucket, schema, this, this.#publisher, this.jsRetry);
  }

  /**
   * A bucket created before the cluster grew (or with TRIAD_KV_REPLICAS unset) keeps its replica count: raise it
   * (never lower it: another client may have asked for more). Every client opening it checks once.
   */
  async #raiseReplicas(bucket: string): Promise<void> {
    if (this.kvReplicas <= 1) return;
    const jsm = await jetstreamManager(this.nc);
    const info = await jsm.streams.info(`KV_${bucket}`);
    if (info.config.num_replicas >= this.kvReplicas) return;
    await jsm.streams.update(info.config.name, { ...info.config, num_replicas: this.kvReplicas });
    this.#logger?.info({ bucket, from: info.config.num_replicas, to: this.kvReplicas }, 'raised KV bucket replicas');
  }

  async drain(): Promise<void> {
    if (!this.nc.isClosed()) await this.nc.drain();
  }

  async close(): Promise<void> {
    if (!this.nc.isClosed()) await this.nc.close();
  }
}

/** Connects to NATS; with `waitOnFirstConnect` it keeps trying until a server answers. Reconnects forever. */
export async function connectBus(options: BusOptions): Promise<Bus> {
  const servers = typeof options.servers === 'string' ? options.servers.split(',') : [...options.servers];
  const nc = await connect({
    servers,
    name: options.name,
    maxReconnectAttempts: -1,
    reconnectTimeWait: 250,
    waitOnFirstConnect: options.waitOnFirstConnect ?? false,
    timeout: options.connectTimeoutMs ?? 5_000,
    // nats.js otherwise allocates an Error per request (and per subscription with a timeout) to carry the
    // caller's stack into a later timeout; on the scheduling hot path that cost is measurable and our callers
    // handle timeouts themselves.
    noAsyncTraces: true,
    noEcho: options.noEcho ?? false,
  });
  return new Bus(nc, options.logger, options.kvReplicas === undefined ? {} : { kvReplicas: options.kvReplicas });
}
