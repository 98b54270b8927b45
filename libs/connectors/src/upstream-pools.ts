import { Client, Pool, type Dispatcher } from 'undici';
import { originOf } from './addresses';
import { H1Pool, type H1Handler } from './h1/pool';
import type { RemoteOrigin } from './types';

/** Connection-pool settings for engine endpoints. */
export interface UpstreamPoolOptions {
  /**
   * Most requests in flight to one endpoint (one socket each) when its ModelServer sets no
   * `connectionPool.maxConnections`. Well above an engine's batch, so the queue forms inside the engine, where
   * its waiting count is scraped and scheduled on, not invisibly in the gateway.
   */
  readonly connections: number;
  /**
   * How long an idle keep-alive socket is kept. Below the engines' own idle timeout (vLLM's uvicorn closes after
   * `VLLM_HTTP_TIMEOUT_KEEP_ALIVE`, 5 s by default), so a pooled socket is retired before the server closes it and a
   * request is never written to a socket the engine is closing (which fails with nothing in the engine's log).
   */
  readonly keepAliveTimeoutMs: number;
  /** Budget for establishing a TCP connection. */
  readonly connectTimeoutMs: number;
  /**
   * The client of plain `http:` origins (the engines): the gateway's own HTTP/1.1 client (`h1/`, the default), or
   * undici as before it (for comparison). `https:` origins always use undici.
   */
  readonly httpTransport: 'h1' | 'undici';
}

/** Default per-endpoint limit: several times the batch of a vLLM or SGLang pod (hundreds of sequences). */
export const DEFAULT_UPSTREAM_CONNECTIONS = 1024;

/** Half of vLLM's default server keep-alive (5 s), as vLLM's own EPD proxy retires its pooled connections. */
export const DEFAULT_UPSTREAM_KEEP_ALIVE_MS = 2_500;

/**
 * Idle keep-alive for origins outside the cluster (external providers): they keep connections open far longer
 * than an engine, and a TLS handshake per request would cost more than an engine's TCP one.
 */
const REMOTE_KEEP_ALIVE_MS = 30_000;

/** Defaults sized for one gateway in front of many engines. */
function defaultUpstreamPoolOptions(): UpstreamPoolOptions {
  return {
    connections: DEFAULT_UPSTREAM_CONNECTIONS,
    keepAliveTimeoutMs: DEFAULT_UPSTREAM_KEEP_ALIVE_MS,
    connectTimeoutMs: 5_000,
    httpTransport: 'h1',
  };
}

/** A request that may have to wait for a free connection to its endpoint (the stage loop's leg). */
export interface UpstreamRequest extends H1Handler {
  /** What to send; read when the request gets a connection. */
  readonly request: Dispatcher.DispatchOptions;
  /** Every connection of the endpoint is busy: the request waits in `slot`'s queue. */
  queued(slot: EndpointSlot): void;
  /** The request got a connection (after waiting for one when `waited`): it is dispatched right after this. */
  connected(slot: EndpointSlot, waited: boolean): void;
}

/** What a request holds while it runs on an endpoint: it gives the connection back exactly once. */
export interface EndpointSlot {
  /** The request settled: its connection goes to the next waiting request. */
  release(): void;
  /** A waiting request gave up (timeout, client gone): it leaves the queue. */
  withdraw(request: UpstreamRequest): void;
  /** This endpoint's connection limit (for error messages). */
  readonly limit: number;
  /** Requests waiting for a connection to this endpoint right now. */
  readonly waiting: number;
  /** The origin undici's requests to this endpoint carry (`scheme://host[:port]`, as `URL.origin` spells it). */
  readonly origin: string;
  /**
   * The transport tells each request its socket (`socketAssigned`, the gateway's own client); with undici the leg
   * learns it from undici's diagnostics channel (socket-reuse.ts).
   */
  readonly reportsSockets: boolean;
  /**
   * Sends the request again, once, on a new connection of its own (it keeps its place under the limit): its kept-alive
   * socket was closed by the engine as it was written, before any byte came back.
   */
  resendFresh(request: UpstreamRequest): void;
}

/** What an endpoint sends its requests with. */
interface LegTransport {
  dispatch(request: Dispatcher.DispatchOptions, handler: UpstreamRequest): void;
  /** Sends on a new connection of its own, never a pooled one. */
  dispatchFresh(request: Dispatcher.DispatchOptions, handler: UpstreamRequest): void;
  close(): Promise<void>;
  destroy(): Promise<void>;
}

/** undici's Pool, and a one-request Client for a fresh connection. */
class UndiciTransport implements LegTransport {
  readonly #pool: Pool;
  readonly #origin: string;
  readonly #options: Client.Options;

  constructor(origin: string, options: Pool.Options & Client.Options) {
    this.#pool = new Pool(origin, options);
    this.#origin = origin;
    this.#options = options;
  }

  dispatch(request: Dispatcher.DispatchOptions, handler: UpstreamRequest): void {
    this.#pool.dispatch(request, handler);
  }

  dispatchFresh(request: Dispatcher.DispatchOptions, handler: UpstreamRequest): void {
    // A one-request client: the pool could hand back another idle socket the engine is closing too. It closes once
    // the request settles.
    const client = new Client(this.#origin, this.#options);
    try {
      client.dispatch(request, handler);
    } finally {
      void client.close().catch(() => undefined);
    }
  }

  close(): Promise<void> {
    return this.#pool.close();
  }

  destroy(): Promise<void> {
    return this.#pool.destroy();
  }
}

/**
 * One endpoint: a connection pool (the gateway's own HTTP/1.1 client for `http:`, undici's Pool for `https:`) of `limit` sockets, and a FIFO of the requests beyond it. The queue is the
 * gateway's, not undici's, so its length is known (a metric, the error message), a request that gives up leaves
 * it at once, and nothing ever waits inside undici.
 */
class EndpointPool implements EndpointSlot {
  readonly pool: LegTransport;
  readonly limit: number;
  readonly origin: string;
  readonly reportsSockets: boolean;
  running = 0;
  /** Waiting requests in arrival order (a Set: O(1) withdrawal, insertion-ordered iteration). */
  readonly #queue = new Set<UpstreamRequest>();
  readonly #onWaiting: (delta: number) => void;
  readonly #onResent: () => void;

  constructor(
    origin: string,
    transport: LegTransport,
    reportsSockets: boolean,
    limit: number,
    onWaiting: (delta: number) => void,
    onResent: () => void,
  ) {
    this.pool = transport;
    this.reportsSockets = reportsSockets;
    this.origin = new URL(origin).origin;
    this.limit = limit;
    this.#onWaiting = onWaiting;
    this.#onResent = onResent;
  }

  get waiting(): number {
    return this.#queue.size;
  }

  /** Sends `req` now, or queues it while `limit` requests run; returns false when it has to wait. */
  submit(req: UpstreamRequest): boolean {
    if (this.running < this.limit) {
      this.#start(req, false);
      return true;
    }
    this.#queue.add(req);
    this.#onWaiting(1);
    req.queued(this);
    return false;
  }

  release(): void {
    this.running--;
    this.#next();
  }

  withdraw(req: UpstreamRequest): void {
    if (this.#queue.delete(req)) this.#onWaiting(-1);
  }

  #next(): void {
    while (this.running < this.limit && this.#queue.size > 0) {
      const req = this.#queue.values().next().value as UpstreamRequest;
      this.#queue.delete(req);
      this.#onWaiting(-1);
      this.#start(req, true);
    }
  }

  #start(req: UpstreamRequest, waited: boolean): void {
    this.running++;
    req.connected(this, waited);
    try {
      this.pool.dispatch(req.request, req);
    } catch (err) {
      req.onError?.(err as Error);
    }
  }

  resendFresh(req: UpstreamRequest): void {
    this.#onResent();
    // A connection of its own: the pool could hand back another idle socket the engine is closing too. The
    // request's slot stays counted in `running` throughout.
    try {
      this.pool.dispatchFresh(req.request, req);
    } catch (err) {
      req.onError?.(err as Error);
    }
  }

  /** Requests still queued when the endpoint leaves fail like a refused connection would. */
  failWaiting(reason: Error): void {
    const queued = [...this.#queue];
    this.#queue.clear();
    this.#onWaiting(-queued.length);
    for (const req of queued) req.onError?.(reason);
  }
}

/**
 * One keep-alive pool per engine address (the gateway's own HTTP/1.1 client, h1/), created on first use, with a gateway-side limit of requests in
 * flight per address (one socket each: no pipelining). Timeouts are left to the stage loop (it knows which stage
 * a leg belongs to), so the pools run with no header/body timers (undici's are turned off); a request waiting for a connection is
 * bounded by its leg's stage budget like one waiting for its first byte.
 */
export class UpstreamPools {
  readonly #pools = new Map<string, EndpointPool>();
  /**
   * The engine pools of `#pools` by ip, then port: a leg finds its pool with two lookups on the values it holds,
   * without building the `ip:port` key and the origin per leg (they are built when a pool is made).
   */
  readonly #byAddress = new Map<string, Map<number, EndpointPool>>();
  readonly #options: UpstreamPoolOptions;
  #waiting = 0;
  #resent = 0;
  readonly #onResent = (): void => {
    this.#resent++;
  };
  readonly #onWaiting = (delta: number): void => {
    this.#waiting += delta;
  };

  constructor(options: Partial<UpstreamPoolOptions> = {}) {
    this.#options = { ...defaultUpstreamPoolOptions(), ...options };
  }

  /** The per-endpoint limit when the ModelServer sets none. */
  get defaultLimit(): number {
    return this.#options.connections;
  }

  /**
   * Sends `req` to `ip:port` with at most `limit` (default: the gateway's) requests running there; returns false
   * when it waits for a connection (it is sent as soon as one is free, or fails when withdrawn).
   */
  send(ip: string, port: number, limit: number | undefined, req: UpstreamRequest): boolean {
    const max = limit ?? this.#options.connections;
    let ports = this.#byAddress.get(ip);
    const known = ports?.get(port);
    if (known !== undefined && known.limit === max) return known.submit(req);
    const ep = this.#endpoint(`${ip}:${port}`, originOf(ip, port), max, undefined);
    if (ports === undefined) {
      ports = new Map();
      this.#byAddress.set(ip, ports);
    }
    ports.set(port, ep);
    return ep.submit(req);
  }

  /** Like {@link send}, to an origin outside the cluster (HTTPS, its certificate verified unless told not to). */
  sendTo(origin: RemoteOrigin, limit: number | undefined, req: UpstreamRequest): boolean {
    const key = origin.verifyTls ? origin.url : `${origin.url} insecure`;
    return this.#endpoint(key, origin.url, limit ?? this.#options.connections, origin).submit(req);
  }

  #endpoint(key: string, origin: string, limit: number, remote: RemoteOrigin | undefined): EndpointPool {
    let ep = this.#pools.get(key);
    if (ep !== undefined && ep.limit === limit) return ep;
    // A new limit (the ModelServer changed) takes a new pool; the old one finishes what it runs, then closes.
    // Requests still waiting on it keep their place there and are sent by it as connections free up.
    if (ep !== undefined) void ep.pool.close().catch(() => undefined);
    const keepAlive = remote === undefined ? this.#options.keepAliveTimeoutMs : REMOTE_KEEP_ALIVE_MS;
    const own = this.#options.httpTransport === 'h1' && origin.startsWith('http:');
    const transport = own
      ? new H1Pool(origin, { keepAliveTimeoutMs: keepAlive, connectTimeoutMs: this.#options.connectTimeoutMs })
      : new UndiciTransport(origin, {
          connections: limit,
          pipelining: 1,
          keepAliveTimeout: keepAlive,
          // A server's `Keep-Alive: timeout=…` hint may shorten the idle time, never lengthen it past ours.
          keepAliveMaxTimeout: keepAlive,
          connectTimeout: this.#options.connectTimeoutMs,
          headersTimeout: 0,
          bodyTimeout: 0,
          ...(remote !== undefined && !remote.verifyTls ? { connect: { rejectUnauthorized: false } } : {}),
        });
    ep = new EndpointPool(origin, transport, own, limit, this.#onWaiting, this.#onResent);
    this.#pools.set(key, ep);
    return ep;
  }

  /** Number of pools currently open. */
  get size(): number {
    return this.#pools.size;
  }

  /** Requests sent again on a fresh connection because their kept-alive socket was closed under them. */
  get resentFresh(): number {
    return this.#resent;
  }

  /** Requests waiting for a connection, over every endpoint. */
  get waiting(): number {
    return this.#waiting;
  }

  /** Closes the pool of an address that left: running requests finish, waiting ones fail as unreachable. */
  release(ip: string, port: number): void {
    const key = `${ip}:${port}`;
    const ports = this.#byAddress.get(ip);
    ports?.delete(port);
    if (ports?.size === 0) this.#byAddress.delete(ip);
    const ep = this.#pools.get(key);
    if (ep === undefined) return;
    this.#pools.delete(key);
    ep.failWaiting(endpointGoneError(`endpoint ${key} left before a connection to it was free`));
    void ep.pool.close().catch(() => undefined);
  }

  /** Closes every pool; with `force` in-flight requests are aborted. */
  async close(force = false): Promise<void> {
    const pools = [...this.#pools.values()];
    this.#pools.clear();
    this.#byAddress.clear();
    for (const ep of pools) ep.failWaiting(endpointGoneError('the gateway closed before a connection to the endpoint was free'));
    await Promise.all(pools.map((ep) => (force ? ep.pool.destroy() : ep.pool.close()).catch(() => undefined)));
  }
}

/** Fails a waiting request like a refused connection (retryable on the next alternate). */
function endpointGoneError(message: string): Error {
  return Object.assign(new Error(message), { code: 'ECONNREFUSED' });
}
