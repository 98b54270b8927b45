import { connect, type Socket } from 'node:net';
import type { Dispatcher } from 'undici';
import type { SocketUse } from '../socket-reuse';
import { connectTimeoutError, otherSideClosedError, poolDestroyedError, requestAbortedError } from './errors';
import { prepareRequest, type PreparedRequest } from './request-head';
import { ResponseParser, type ResponseSink } from './response-parser';

/**
 * The subset of undici's legacy dispatch handler the legs implement, plus the socket hand-off: the transport tells
 * the handler which socket its request is written on (for the keep-alive resend, socket-reuse.ts).
 */
export interface H1Handler {
  /** Right before the request is written, in the same call; `abort` stops it (and the answer) at any time. */
  onConnect?(abort: (err?: Error) => void): void;
  /** Right after `onConnect`, when the request was not aborted there. */
  socketAssigned?(use: SocketUse): void;
  /** Returns false to pause the answer until `resume` is called. Raw headers: name, value, … (strings here, Buffers from undici). */
  onHeaders?(statusCode: number, rawHeaders: (Buffer | string)[], resume: () => void, statusText: string): boolean;
  onData?(chunk: Buffer): boolean;
  onComplete?(trailers: string[] | null): void;
  onError?(err: Error): void;
}

export interface H1PoolOptions {
  /** How long an idle connection is kept; a shorter `Keep-Alive: timeout=` hint of the server (less 2 s) wins. */
  readonly keepAliveTimeoutMs: number;
  readonly connectTimeoutMs: number;
}

/** undici's margin under a server's `Keep-Alive: timeout=` hint, kept so the hint is read the same way. */
const KEEP_ALIVE_HINT_MARGIN_MS = 2_000;

const enum ConnState {
  Connecting,
  Busy,
  Idle,
  Closed,
}

/**
 * One socket, one request at a time (no pipelining). It belongs to its pool from connect to close; between
 * requests it sits in the pool's idle list.
 */
class H1Connection implements ResponseSink {
  readonly socket: Socket;
  readonly #pool: H1Pool;
  readonly #parser: ResponseParser;
  #state = ConnState.Connecting;
  #handler: H1Handler | undefined;
  /** The request waiting for the connect. */
  #first: PreparedRequest | undefined;
  #connectTimer: NodeJS.Timeout | undefined;
  /** Requests written on this socket so far. */
  #requests = 0;
  /** `connection: close` asked for, or the answer said so: not reused. */
  #lastRequest = false;
  /** The current request has been written (an abort before it leaves the socket clean). */
  #written = false;
  idleSince = 0;
  idleUntil = 0;
  /** The socket is paused for a slow reader of the answer. */
  #socketPaused = false;
  readonly #resume = (): void => {
    this.#parser.resume();
    if (this.#socketPaused && this.#state === ConnState.Busy && !this.#parser.paused) {
      this.#socketPaused = false;
      this.socket.resume();
    }
  };

  constructor(pool: H1Pool, request: PreparedRequest, handler: H1Handler) {
    this.#pool = pool;
    this.#handler = handler;
    this.#first = request;
    this.#parser = new ResponseParser(this);
    const socket = connect({ host: pool.host, port: pool.port, noDelay: true, keepAlive: true, keepAliveInitialDelay: 60_000 });
    this.socket = socket;
    const timeoutMs = pool.connectTimeoutMs;
    if (timeoutMs > 0) this.#connectTimer = setTimeout(onConnectTimeout, timeoutMs, this, `${pool.host}:${pool.port}`, timeoutMs);
    socket.once('connect', () => this.#connected());
    socket.on('data', (chunk: Buffer) => this.#data(chunk));
    socket.on('end', () => this.#end());
    socket.on('error', (err: Error) => this.#failed(err));
    socket.on('close', () => this.#closed());
  }

  get idle(): boolean {
    return this.#state === ConnState.Idle;
  }

  connectTimedOut(address: string, timeoutMs: number): void {
    this.#connectTimer = undefined;
    if (this.#state === ConnState.Connecting) this.#failed(connectTimeoutError(address, timeoutMs));
  }

  #connected(): void {
    if (this.#connectTimer !== undefined) {
      clearTimeout(this.#connectTimer);
      this.#connectTimer = undefined;
    }
    const request = this.#first;
    const handler = this.#handler;
    this.#first = undefined;
    if (this.#state !== ConnState.Connecting || request === undefined || handler === undefined) return;
    this.start(request, handler);
  }

  /** Writes `request` (the connection is connected and free) and reads its answer for `handler`. */
  start(request: PreparedRequest, handler: H1Handler): void {
    this.#state = ConnState.Busy;
    this.#handler = handler;
    this.#written = false;
    this.#parser.reset();
    const socket = this.socket;
    const reused = this.#requests > 0;
    const idleMs = reused ? performance.now() - this.idleSince : 0;
    handler.onConnect?.((err?: Error) => this.#abort(handler, err));
    if (this.#handler !== handler) return;
    handler.socketAssigned?.({ socket, reused, bytesReadAtStart: socket.bytesRead, idleMs });
    if (this.#handler !== handler) return;
    this.#requests++;
    this.#written = true;
    if (request.close) this.#lastRequest = true;
    socket.cork();
    socket.write(request.head, 'latin1');
    if (request.body !== undefined) socket.write(request.body);
    socket.uncork();
  }

  #abort(handler: H1Handler, err: Error | undefined): void {
    if (this.#handler !== handler) return;
    this.#handler = undefined;
    this.#parser.halt();
    if (this.#written) {
      // Part of the answer may still come: the socket cannot carry another request.
      this.#state = ConnState.Closed;
      this.socket.destroy();
      this.#pool.forget(this);
    } else {
      this.#toIdle(-1);
    }
    handler.onError?.(err ?? requestAbortedError());
  }

  #data(chunk: Buffer): void {
    if (this.#state !== ConnState.Busy || this.#handler === undefined) {
      // Bytes on an idle socket belong to no request (or announce a close): it is never used again.
      this.#retire();
      return;
    }
    try {
      this.#parser.execute(chunk);
    } catch (err) {
      this.#failed(err as Error);
      return;
    }
    if (this.#parser.paused && this.#state === ConnState.Busy && !this.#socketPaused) {
      this.#socketPaused = true;
      this.socket.pause();
    }
  }

  #end(): void {
    if (this.#state === ConnState.Busy && this.#handler !== undefined) {
      if (this.#parser.untilClose) {
        this.#lastRequest = true;
        this.#parser.finish();
        return;
      }
      this.#failed(otherSideClosedError());
      return;
    }
    this.#retire();
  }

  #closed(): void {
    if (this.#connectTimer !== undefined) {
      clearTimeout(this.#connectTimer);
      this.#connectTimer = undefined;
    }
    if (this.#handler !== undefined) this.#failed(otherSideClosedError());
    this.#state = ConnState.Closed;
    this.#pool.forget(this);
  }

  #failed(err: Error): void {
    const handler = this.#handler;
    this.#handler = undefined;
    this.#first = undefined;
    this.#parser.halt();
    this.#state = ConnState.Closed;
    this.socket.destroy();
    this.#pool.forget(this);
    handler?.onError?.(err);
  }

  /** Fails the running request (the pool is destroyed) and closes the socket. */
  destroy(err: Error): void {
    if (this.#state === ConnState.Closed) return;
    this.#failed(err);
  }

  /** Closes an idle connection (retired, or the pool closes). */
  #retire(): void {
    if (this.#state === ConnState.Closed) return;
    this.#state = ConnState.Closed;
    this.socket.destroy();
    this.#pool.forget(this);
  }

  retire(): void {
    this.#retire();
  }

  // ResponseSink: the parser's callbacks for the running request.

  head(status: number, statusText: string, rawHeaders: string[]): boolean {
    const handler = this.#handler;
    if (handler === undefined) return false;
    return handler.onHeaders?.(status, rawHeaders, this.#resume, statusText) !== false;
  }

  body(chunk: Buffer): boolean {
    const handler = this.#handler;
    if (handler === undefined) return false;
    return handler.onData?.(chunk) !== false;
  }

  complete(excess: boolean): void {
    const handler = this.#handler;
    if (handler === undefined) return;
    this.#handler = undefined;
    const parser = this.#parser;
    if (excess || !parser.keepAlive || this.#lastRequest || this.#pool.closing) {
      this.#state = ConnState.Closed;
      this.socket.destroy();
      this.#pool.forget(this);
    } else {
      this.#toIdle(parser.keepAliveHintMs);
      if (this.#socketPaused) {
        // The answer ended while its reader was slow: the socket reads again, for its idle check.
        this.#socketPaused = false;
        this.socket.resume();
      }
    }
    // The connection is back in the pool first: a request this completion lets go (the endpoint's queue) takes it.
    handler.onComplete?.(null);
  }

  #toIdle(hintMs: number): void {
    let keepMs = this.#pool.keepAliveTimeoutMs;
    if (hintMs >= 0) {
      const hinted = hintMs - KEEP_ALIVE_HINT_MARGIN_MS;
      if (hinted <= 0) {
        this.#retire();
        return;
      }
      if (hinted < keepMs) keepMs = hinted;
    }
    const now = performance.now();
    this.#state = ConnState.Idle;
    this.idleSince = now;
    this.idleUntil = now + keepMs;
    this.#pool.idled(this);
  }
}

function onConnectTimeout(conn: H1Connection, address: string, timeoutMs: number): void {
  conn.connectTimedOut(address, timeoutMs);
}

function onSweep(pool: H1Pool): void {
  pool.sweep();
}

/**
 * The gateway's own HTTP/1.1 client for one plain `http:` origin: keep-alive connections, one request each at a
 * time, no queue (the endpoint's limit and queue are `EndpointPool`'s) and no limit of its own. A request takes
 * the most recently idled connection still fit for use, else connects a new one.
 *
 * - Idle retirement: a connection idle for `keepAliveTimeoutMs` (or a server's shorter `Keep-Alive: timeout=`
 *   hint less 2 s) is closed by a sweep and never taken after that time.
 * - Idle validation: a connection that receives a byte or an end while idle is closed at once, so it is never
 *   handed to a request.
 * - `close()` lets running requests finish (a connection is closed when its answer is complete); requests
 *   dispatched after it still run, each on a connection of its own. `destroy()` fails them.
 */
export class H1Pool {
  readonly host: string;
  readonly port: number;
  readonly hostHeader: string;
  readonly keepAliveTimeoutMs: number;
  readonly connectTimeoutMs: number;
  closing = false;
  #destroyed = false;
  /** Idle connections, the most recently idled last. */
  readonly #idle: H1Connection[] = [];
  readonly #all = new Set<H1Connection>();
  #sweepTimer: NodeJS.Timeout | undefined;
  /** When the armed sweep runs (performance.now()). */
  #sweepAt = 0;
  #onEmpty: (() => void) | undefined;

  constructor(origin: string, options: H1PoolOptions) {
    const url = new URL(origin);
    if (url.protocol !== 'http:') throw new Error(`the HTTP/1.1 pool takes http: origins only, not ${origin}`);
    this.host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
    this.port = url.port === '' ? 80 : Number(url.port);
    // undici's host header: the origin's host and its port when not the default.
    this.hostHeader = url.host;
    this.keepAliveTimeoutMs = options.keepAliveTimeoutMs;
    this.connectTimeoutMs = options.connectTimeoutMs;
  }

  /** Connections open (idle, busy or connecting). */
  get connections(): number {
    return this.#all.size;
  }

  get idleConnections(): number {
    return this.#idle.length;
  }

  /**
   * Sends a request on an idle connection, or on a new one. An invalid request fails the handler (`onError`) in
   * this call, as undici's dispatch does.
   */
  dispatch(options: Dispatcher.DispatchOptions, handler: H1Handler): boolean {
    const request = this.#prepare(options, handler);
    if (request === undefined) return false;
    const idle = this.#idle;
    if (idle.length > 0) {
      const now = performance.now();
      let conn;
      while ((conn = idle.pop()) !== undefined) {
        if (conn.idle && now < conn.idleUntil && !conn.socket.destroyed) {
          conn.start(request, handler);
          return true;
        }
        conn.retire();
      }
    }
    this.#connect(request, handler);
    return true;
  }

  /** Sends a request on a new connection of its own, never an idle one (the keep-alive resend). */
  dispatchFresh(options: Dispatcher.DispatchOptions, handler: H1Handler): boolean {
    const request = this.#prepare(options, handler);
    if (request === undefined) return false;
    this.#connect(request, handler);
    return true;
  }

  #prepare(options: Dispatcher.DispatchOptions, handler: H1Handler): PreparedRequest | undefined {
    try {
      return prepareRequest(options, this.hostHeader);
    } catch (err) {
      handler.onError?.(err as Error);
      return undefined;
    }
  }

  #connect(request: PreparedRequest, handler: H1Handler): void {
    if (this.#destroyed) {
      handler.onError?.(poolDestroyedError());
      return;
    }
    this.#all.add(new H1Connection(this, request, handler));
  }

  /** A connection finished its request and may be reused. */
  idled(conn: H1Connection): void {
    if (this.closing) {
      conn.retire();
      return;
    }
    this.#idle.push(conn);
    // A server's hint can make this connection's time shorter than the one the sweep is set for.
    if (this.#sweepTimer === undefined || conn.idleUntil < this.#sweepAt) this.#armSweep(conn.idleUntil - performance.now());
  }

  /** A connection closed: it leaves the pool. */
  forget(conn: H1Connection): void {
    if (!this.#all.delete(conn)) return;
    const at = this.#idle.lastIndexOf(conn);
    if (at >= 0) this.#idle.splice(at, 1);
    if (this.#all.size === 0 && this.#onEmpty !== undefined) {
      const done = this.#onEmpty;
      this.#onEmpty = undefined;
      done();
    }
  }

  #armSweep(delayMs: number): void {
    if (this.#sweepTimer !== undefined) clearTimeout(this.#sweepTimer);
    const delay = Math.max(delayMs, 50);
    this.#sweepAt = performance.now() + delay;
    this.#sweepTimer = setTimeout(onSweep, delay, this);
    this.#sweepTimer.unref();
  }

  /** Retires the connections idle past their time; runs again at the next one's. */
  sweep(): void {
    this.#sweepTimer = undefined;
    const now = performance.now();
    let next = Infinity;
    for (const conn of [...this.#idle]) {
      if (now >= conn.idleUntil) conn.retire();
      else if (conn.idleUntil < next) next = conn.idleUntil;
    }
    if (next !== Infinity) this.#armSweep(next - now);
  }

  /** Closes idle connections now and the others once their answers are complete. */
  close(): Promise<void> {
    this.closing = true;
    this.#stopSweep();
    for (const conn of [...this.#idle]) conn.retire();
    return this.#whenEmpty();
  }

  /** Closes every connection now; running requests fail. */
  destroy(): Promise<void> {
    this.closing = true;
    this.#destroyed = true;
    this.#stopSweep();
    const err = poolDestroyedError();
    for (const conn of [...this.#all]) conn.destroy(err);
    return this.#whenEmpty();
  }

  #stopSweep(): void {
    if (this.#sweepTimer !== undefined) {
      clearTimeout(this.#sweepTimer);
      this.#sweepTimer = undefined;
    }
  }

  #whenEmpty(): Promise<void> {
    if (this.#all.size === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const previous = this.#onEmpty;
      this.#onEmpty = () => {
        previous?.();
        resolve();
      };
    });
  }
}
