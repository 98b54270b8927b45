import { connect, type Socket } from 'node:net';
import { isHeaderValue } from '@triad/runtime';
import { BodyPool } from './body-pool';
import { digitsValue } from './ascii-digits';

/** A GET answer: status and the whole body. */
export interface GetAnswer {
  readonly status: number;
  readonly body: Buffer;
}

export interface GetOptions {
  readonly timeoutMs: number;
  readonly maxBodyBytes: number;
  readonly accept: string;
  /**
   * `Authorization` value to send (an engine's `--api-key`, for its API reads). A head with one is built for the
   * request and not kept with the engine's cached heads.
   */
  readonly authorization?: string;
}

/** Why a GET failed: no connection, no complete answer in time, or an answer that is not HTTP/1.1 as expected. */
export class GetError extends Error {
  readonly kind: 'connect' | 'timeout' | 'protocol' | 'too-large';
  readonly code: string | undefined;
  constructor(kind: GetError['kind'], message: string, code?: string) {
    super(message);
    this.name = 'GetError';
    this.kind = kind;
    this.code = code;
  }
}

/** Reads the answer: status and body, the body valid only during the call (its memory is reused afterwards). */
export type AnswerReader<T> = (status: number, body: Buffer) => T;

/** Told how a request ended: the failure ({@link GetError}, or what the reader threw), or what the reader returned. */
export type RequestDone<T> = (err: unknown, value: T | undefined) => void;

const CRLF2 = Buffer.from('\r\n\r\n');
const CRLF = Buffer.from('\r\n');
const HTTP_1 = Buffer.from('HTTP/1.', 'latin1');
const SPACE = 32;
const TAB = 9;
const COLON = 58;
const ONE = 49;
/** The headers that frame a body, by length (a header name is matched without making it a string). */
const FRAMING_HEADERS = ['content-length', 'transfer-encoding', 'connection'] as const;
type FramingHeader = (typeof FRAMING_HEADERS)[number];

/** head[from, to) as one of the framing headers (any case, spaces around it allowed), else undefined. */
function headerOf(head: Buffer, from: number, to: number): FramingHeader | undefined {
  while (from < to && head[from] === SPACE) from += 1;
  while (to > from && head[to - 1] === SPACE) to -= 1;
  outer: for (const name of FRAMING_HEADERS) {
    if (to - from !== name.length) continue;
    for (let i = 0; i < name.length; i++) {
      // ASCII letters compare without case (| 0x20); '-' is 0x2d either way.
      if ((head[from + i] | 0x20) !== name.charCodeAt(i)) continue outer;
    }
    return name;
  }
  return undefined;
}

/** A Content-Length value, head[from, to) with spaces around it, read from the bytes; NaN unless it is digits. */
function lengthOf(head: Buffer, from: number, to: number): number {
  while (from < to && (head[from] === SPACE || head[from] === TAB)) from += 1;
  while (to > from && (head[to - 1] === SPACE || head[to - 1] === TAB)) to -= 1;
  const n = digitsValue(head, from, to, 15);
  return n < 0 ? NaN : n;
}

/**
 * Every socket reads into this one buffer (`onread`): a read is handled before the next one starts, and the
 * bytes are copied out into the answer's body at once. So receiving a page allocates nothing per read.
 */
const READ_BUFFER = Buffer.allocUnsafeSlow(64 * 1024);

/** One request: where its answer goes, and when it must be complete. */
interface Exchange {
  readonly origin: Origin;
  readonly head: Buffer;
  readonly timeoutMs: number;
  readonly maxBody: number;
  readonly read: AnswerReader<unknown>;
  readonly done: RequestDone<unknown>;
  /** Sent on a kept-alive socket: a close before any answer byte means the engine closed it first (ask again). */
  reused: boolean;
  answer: AnswerParser | undefined;
  /** The connection it was sent on (undefined while it waits for the engine's previous request). */
  conn: Connection | undefined;
  /** When it times out (`performance.now()`), waiting for the engine's previous request included. */
  readonly deadline: number;
  /** Neighbours in the list of requests not over yet, which the deadline sweep walks. */
  prev: Exchange | undefined;
  next: Exchange | undefined;
  over: boolean;
}

interface Origin {
  readonly key: string;
  readonly host: string;
  readonly port: number;
  readonly hostHeader: string;
  /** Request heads by path (a scrape asks the same few paths of an engine over and over). */
  readonly heads: Map<string, Buffer>;
  /** The kept-alive connection, when idle. */
  idle: Connection | undefined;
  /** Forgotten while a request ran: its connection is closed when it ends instead of kept. */
  forgotten: boolean;
  /** The request on the wire (one at a time per engine: one socket, one descriptor) and those waiting for it. */
  running: Exchange | undefined;
  readonly waiting: Exchange[];
}

/** A socket with its listeners set once: each request only points the connection at its exchange. */
interface Connection {
  readonly socket: Socket;
  current: Exchange | undefined;
  idleSince: number;
  /** Frames each answer on this socket in turn (reset per request: thousands of answers a second allocate none). */
  readonly parser: AnswerParser;
}

/**
 * Plain-HTTP GETs over kept-alive sockets, one request per socket at a time: what scraping thousands of engines
 * every second needs and no more. A general client (undici) spends several times the CPU per request on things a
 * scrape does not use (dispatchers, abort signals, header objects, streams). Here a request is one write of a
 * head built once per engine and path; the answer is read without streams (`onread` into one shared buffer) and
 * framed by Content-Length or chunked encoding straight into a body buffer that is reused for the next answer
 * once the caller has read it (see {@link read}). Requests to one engine take turns on one socket (10,000 engines
 * are 10,000 descriptors). A kept-alive socket the engine closed meanwhile gets the request again on a new
 * socket, once.
 */
export class KeepAliveGet {
  readonly #origins = new Map<string, Origin>();
  readonly #keepAliveMs: number;
  readonly #sweep: NodeJS.Timeout;
  /**
   * Times requests out: one timer walking the requests not over yet, rather than a timer per request (a timer
   * made and cleared per scrape was ~3 % of a pod-watcher's busy time, its garbage aside). A request fails within
   * `deadlineSweepMs` after its budget.
   */
  readonly #deadlines: NodeJS.Timeout;
  #firstPending: Exchange | undefined;
  #lastPending: Exchange | undefined;
  readonly #bodies = new BodyPool();
  #closed = false;

  constructor(options: { keepAliveMs: number; deadlineSweepMs?: number }) {
    this.#keepAliveMs = options.keepAliveMs;
    this.#sweep = setInterval(() => this.#closeIdle(Date.now() - this.#keepAliveMs), Math.max(1000, this.#keepAliveMs / 3));
    this.#sweep.unref();
    this.#deadlines = setInterval(() => this.#expire(performance.now()), options.deadlineSweepMs ?? 50);
    this.#deadlines.unref();
  }

  /** `url` is `http://host:port/path`. Resolves to a body of its own; rejects with a {@link GetError}. */
  get(url: string, opts: GetOptions): Promise<GetAnswer> {
    return this.read(url, opts, (status, body) => ({ status, body: Buffer.from(body) }));
  }

  /**
   * Like {@link get}, but hands the body to `reader` and resolves to what it returns: the body's memory is reused
   * once `reader` returns, so a scrape that only extracts a few numbers allocates no page. What `reader` throws
   * rejects the call as it is.
   */
  read<T>(url: string, opts: GetOptions, reader: AnswerReader<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => this.request(url, opts, reader, (err, value) => (err ? reject(err) : resolve(value as T))));
  }

  /**
   * {@link read} without a promise: `done` is called once, after the connection is ready for the next request.
   * A scraper that passes the same `reader` and `done` for every scrape of an engine allocates nothing per request
   * here beyond the request itself (a promise chain per scrape was a tenth of a pod-watcher's garbage).
   */
  request<T>(url: string, opts: GetOptions, reader: AnswerReader<T>, done: RequestDone<T>): void {
    if (this.#closed) {
      done(new GetError('connect', 'client closed'), undefined);
      return;
    }
    const slash = url.indexOf('/', 7);
    const origin = this.#origin(slash < 0 ? url : url.slice(0, slash));
    const path = slash < 0 ? '/' : url.slice(slash);
    let head = opts.authorization === undefined ? origin.heads.get(path) : undefined;
    if (head === undefined) {
      const auth = opts.authorization;
      // Written as it is: a value with CR, LF or another control character would forge headers.
      if (auth !== undefined && !isHeaderValue(auth)) {
        done(new GetError('protocol', 'the Authorization value has characters a header cannot carry'), undefined);
        return;
      }
      head = Buffer.from(
        `GET ${path} HTTP/1.1\r\nHost: ${origin.hostHeader}\r\nAccept: ${opts.accept}\r\nUser-Agent: triad-pod-watcher\r\n` +
          `${auth === undefined ? '' : `Authorization: ${auth}\r\n`}\r\n`,
        'latin1',
      );
      if (auth === undefined) origin.heads.set(path, head);
    }
    const ex: Exchange = {
      origin,
      head,
      timeoutMs: opts.timeoutMs,
      maxBody: opts.maxBodyBytes,
      read: reader,
      done: done as RequestDone<unknown>,
      reused: false,
      answer: undefined,
      conn: undefined,
      // The budget covers waiting for the engine's previous request too.
      deadline: performance.now() + opts.timeoutMs,
      prev: this.#lastPending,
      next: undefined,
      over: false,
    };
    if (this.#lastPending === undefined) this.#firstPending = ex;
    else this.#lastPending.next = ex;
    this.#lastPending = ex;
    if (origin.running === undefined) this.#start(ex);
    else origin.waiting.push(ex);
  }

  /** Closes the kept-alive connection to `origin` (`http://host:port`), if idle: its engine is scraped elsewhere now. */
  forget(origin: string): void {
    const o = this.#origins.get(origin);
    if (o === undefined) return;
    o.idle?.socket.destroy();
    o.idle = undefined;
    if (o.running === undefined) this.#origins.delete(origin);
    else o.forgotten = true;
  }

  /** Stops keeping connections; requests on the wire still end (or time out). */
  close(): void {
    this.#closed = true;
    clearInterval(this.#sweep);
    if (this.#firstPending === undefined) clearInterval(this.#deadlines);
    this.#closeIdle(Infinity);
  }

  /** Takes `ex` out of the requests not over yet (nothing when it already was). */
  #over(ex: Exchange): void {
    if (ex.over) return;
    ex.over = true;
    if (ex.prev === undefined) this.#firstPending = ex.next;
    else ex.prev.next = ex.next;
    if (ex.next === undefined) this.#lastPending = ex.prev;
    else ex.next.prev = ex.prev;
    ex.prev = undefined;
    ex.next = undefined;
  }

  /** Fails the requests whose budget ran out by `now`. */
  #expire(now: number): void {
    for (let ex = this.#firstPending; ex !== undefined;) {
      const next = ex.next;
      if (ex.deadline <= now) this.#timedOut(ex);
      ex = next;
    }
    if (this.#closed && this.#firstPending === undefined) clearInterval(this.#deadlines);
  }

  #origin(key: string): Origin {
    let o = this.#origins.get(key);
    if (o) return o;
    const hostPort = key.slice(key.indexOf('//') + 2);
    const colon = hostPort.lastIndexOf(':');
    const bracketed = hostPort.startsWith('[');
    const host = colon > hostPort.lastIndexOf(']') ? hostPort.slice(0, colon) : hostPort;
    const port = colon > hostPort.lastIndexOf(']') ? Number(hostPort.slice(colon + 1)) : 80;
    o = {
      key,
      host: bracketed ? host.slice(1, -1) : host,
      port,
      hostHeader: hostPort,
      heads: new Map(),
      idle: undefined,
      forgotten: false,
      running: undefined,
      waiting: [],
    };
    this.#origins.set(key, o);
    return o;
  }

  #start(ex: Exchange): void {
    const origin = ex.origin;
    origin.running = ex;
    origin.forgotten = false;
    let conn = origin.idle;
    origin.idle = undefined;
    if (conn !== undefined && (conn.socket.destroyed || !conn.socket.writable)) {
      conn.socket.destroy();
      conn = undefined;
    }
    ex.reused = conn !== undefined;
    this.#send(ex, conn ?? this.#connect(origin));
  }

  #send(ex: Exchange, conn: Connection): void {
    ex.answer = conn.parser.reset(ex.maxBody);
    ex.conn = conn;
    conn.current = ex;
    conn.socket.write(ex.head);
  }

  #connect(origin: Origin): Connection {
    const conn: Connection = {
      socket: undefined as unknown as Socket,
      current: undefined,
      idleSince: 0,
      parser: new AnswerParser(0, this.#bodies),
    };
    const socket = connect({
      host: origin.host,
      port: origin.port,
      noDelay: true,
      onread: {
        buffer: READ_BUFFER,
        callback: (bytes: number, buf: Uint8Array) => {
          this.#received(conn, buf as Buffer, bytes);
          return true;
        },
      },
    });
    (conn as { socket: Socket }).socket = socket;
    socket.on('error', (err: NodeJS.ErrnoException) => this.#lost(conn, err));
    socket.on('end', () => this.#lost(conn, undefined));
    socket.on('close', () => this.#lost(conn, undefined));
    return conn;
  }

  #received(conn: Connection, buf: Buffer, bytes: number): void {
    const ex = conn.current;
    if (ex === undefined) {
      // Bytes nobody asked for on an idle socket: it cannot be trusted for the next request.
      conn.socket.destroy();
      return;
    }
    let done: boolean;
    try {
      done = (ex.answer as AnswerParser).push(buf, bytes);
    } catch (err) {
      this.#finish(conn, ex, err as GetError, false);
      return;
    }
    if (done) this.#finish(conn, ex, undefined, (ex.answer as AnswerParser).keepAlive);
  }

  /** The socket failed, or the engine closed it. */
  #lost(conn: Connection, err: NodeJS.ErrnoException | undefined): void {
    const ex = conn.current;
    if (ex === undefined) {
      conn.socket.destroy();
      return;
    }
    const answer = ex.answer as AnswerParser;
    if (err === undefined && answer.endOfConnection()) {
      this.#finish(conn, ex, undefined, false);
      return;
    }
    const closedFirst = ex.reused && !answer.gotBytes && (err === undefined || /ECONNRESET|EPIPE/.test(err.code ?? ''));
    if (closedFirst) {
      // The engine closed the kept-alive socket before reading the request: ask again on a new one, once.
      conn.current = undefined;
      conn.socket.destroy();
      answer.release();
      ex.reused = false;
      this.#send(ex, this.#connect(ex.origin));
      return;
    }
    const failure =
      err !== undefined
        ? new GetError('connect', err.message, err.code)
        : answer.gotBytes
          ? new GetError('protocol', 'connection closed before the answer was complete')
          : new GetError('connect', 'connection closed by the engine');
    this.#finish(conn, ex, failure, false);
  }

  #timedOut(ex: Exchange): void {
    const origin = ex.origin;
    if (origin.running !== ex) {
      // Still waiting for the engine's previous request.
      this.#over(ex);
      origin.waiting.splice(origin.waiting.indexOf(ex), 1);
      ex.done(new GetError('timeout', `no answer within ${ex.timeoutMs} ms (queued behind the previous request)`), undefined);
      return;
    }
    if (ex.conn) this.#finish(ex.conn, ex, new GetError('timeout', `no complete answer within ${ex.timeoutMs} ms`), false);
    // Never looked at again, whatever state it was in.
    this.#over(ex);
  }

  #finish(conn: Connection, ex: Exchange, err: GetError | undefined, keep: boolean): void {
    if (conn.current !== ex) return;
    conn.current = undefined;
    this.#over(ex);
    const origin = ex.origin;
    const answer = ex.answer as AnswerParser;
    if (keep && !this.#closed && !(origin.forgotten && origin.waiting.length === 0)) {
      conn.idleSince = Date.now();
      origin.idle = conn;
    } else {
      conn.socket.destroy();
    }
    let failure: unknown = err;
    let value: unknown;
    if (err === undefined) {
      try {
        value = ex.read(answer.status, answer.body());
      } catch (readErr) {
        failure = readErr;
      }
    }
    answer.release();
    origin.running = undefined;
    const next = origin.waiting.shift();
    if (next !== undefined) this.#start(next);
    else if (origin.forgotten) this.#origins.delete(origin.key);
    // Last: the caller may start its next request to this engine from here.
    ex.done(failure, failure === undefined ? value : undefined);
  }

  #closeIdle(before: number): void {
    for (const [key, o] of this.#origins) {
      const idle = o.idle;
      if (idle !== undefined && (idle.idleSince <= before || idle.socket.destroyed)) {
        o.idle = undefined;
        idle.socket.destroy();
      }
      if (o.idle === undefined && o.running === undefined) this.#origins.delete(key);
    }
  }
}

/**
 * Frames one HTTP/1.1 answer from the bytes read: status line and headers, then a body by Content-Length, chunked
 * encoding, or up to the end of the connection, copied into a pooled body buffer.
 */
export class AnswerParser {
  status = 0;
  keepAlive = true;
  gotBytes = false;
  #maxBody: number;
  readonly #pool: BodyPool;
  /** Header bytes while the head is incomplete (rare: a head comes in its first read). */
  #headBytes: Buffer | undefined;
  #inHead = true;
  #length = -1;
  #chunked = false;
  #body: Buffer | undefined;
  #size = 0;
  /** Chunked: framing bytes not decoded yet (a chunk-size line cut by a read). */
  #raw: Buffer | undefined;
  /** Chunked: bytes of the current chunk still to come, then its CRLF (-1: a size line is next). */
  #chunkLeft = -1;

  constructor(maxBody: number, pool: BodyPool) {
    this.#maxBody = maxBody;
    this.#pool = pool;
  }

  /** Ready for the next answer on the same connection (its body, if still held, goes back to the pool). */
  reset(maxBody: number): this {
    this.release();
    this.status = 0;
    this.keepAlive = true;
    this.gotBytes = false;
    this.#maxBody = maxBody;
    this.#headBytes = undefined;
    this.#inHead = true;
    this.#length = -1;
    this.#chunked = false;
    this.#size = 0;
    this.#raw = undefined;
    this.#chunkLeft = -1;
    return this;
  }

  /** Takes `bytes` bytes of `buf` (copied: the buffer is reused); true once the answer is complete. */
  push(buf: Buffer, bytes: number): boolean {
    this.gotBytes = true;
    let from = 0;
    if (this.#inHead) {
      let data = buf.subarray(0, bytes);
      if (this.#headBytes !== undefined) data = Buffer.concat([this.#headBytes, data]);
      const end = data.indexOf(CRLF2);
      if (end < 0) {
        if (data.length > 64 * 1024) throw new GetError('protocol', 'answer headers larger than 64 KB');
        this.#headBytes = Buffer.from(data);
        return false;
      }
      this.#readHead(data, end);
      this.#inHead = false;
      this.#headBytes = undefined;
      // Continue with what followed the head, in `data` (which is `buf` itself unless the head was split).
      buf = data;
      bytes = data.length;
      from = end + 4;
      if (this.#length === 0) {
        if (from < bytes) this.keepAlive = false;
        return true;
      }
      if (this.#length > 0) this.#body = this.#pool.take(this.#length);
    }
    if (this.#chunked) return this.#pushChunked(buf, from, bytes);
    if (from < bytes) this.#add(buf, from, bytes);
    if (this.#length >= 0 && this.#size >= this.#length) {
      if (this.#size > this.#length) throw new GetError('protocol', 'more bytes than Content-Length');
      return true;
    }
    return false;
  }

  /** The connection ended: true when that completes the answer (a body delimited by the close). */
  endOfConnection(): boolean {
    return !this.#inHead && !this.#chunked && this.#length < 0;
  }

  /** The body read (valid until {@link release}). */
  body(): Buffer {
    return this.#body === undefined ? Buffer.alloc(0) : this.#body.subarray(0, this.#size);
  }

  /** Gives the body's memory back for the next answer. */
  release(): void {
    if (this.#body !== undefined) this.#pool.give(this.#body);
    this.#body = undefined;
  }

  /**
   * Reads the status line and the three headers that frame the body from head[0, end), as bytes: an answer's
   * head is parsed thousands of times a second, and splitting it into strings made a score of them per answer.
   */
  #readHead(head: Buffer, end: number): void {
    // `HTTP/1.x NNN`
    const status = end < 12 ? -1 : digitsValue(head, 9, 12, 3);
    if (status < 0 || head.compare(HTTP_1, 0, HTTP_1.length, 0, HTTP_1.length) !== 0 || head[8] !== SPACE) {
      const first = head.toString('latin1', 0, Math.min(end, 60)).split('\r\n')[0] ?? '';
      throw new GetError('protocol', `not an HTTP/1.x answer: ${JSON.stringify(first)}`);
    }
    this.status = status;
    this.keepAlive = head[7] === ONE;
    for (let at = head.indexOf(CRLF, 0); at >= 0 && at < end;) {
      const start = at + 2;
      let lineEnd = head.indexOf(CRLF, start);
      if (lineEnd < 0 || lineEnd > end) lineEnd = end;
      at = lineEnd < end ? lineEnd : -1;
      const colon = head.indexOf(COLON, start);
      if (colon <= start || colon >= lineEnd) continue;
      const header = headerOf(head, start, colon);
      if (header === undefined) continue;
      if (header === 'content-length') {
        this.#length = lengthOf(head, colon + 1, lineEnd);
        continue;
      }
      const value = head
        .toString('latin1', colon + 1, lineEnd)
        .trim()
        .toLowerCase();
      if (header === 'transfer-encoding')
        this.#chunked = value
          .split(',')
          .map((v) => v.trim())
          .includes('chunked');
      else this.keepAlive = value.includes('keep-alive') || (this.keepAlive && !value.includes('close'));
    }
    if (this.#chunked) this.#length = -1;
    if (this.status === 204 || this.status === 304) this.#length = 0;
    if (Number.isNaN(this.#length) || this.#length > this.#maxBody) throw new GetError('too-large', `Content-Length ${this.#length}`);
    if (this.#length < 0 && !this.#chunked) this.keepAlive = false;
  }

  /** Copies buf[from, to) to the end of the body, growing it (a pooled buffer twice the size) when needed. */
  #add(buf: Buffer, from: number, to: number): void {
    const n = to - from;
    if (this.#size + n > this.#maxBody) throw new GetError('too-large', `body larger than ${this.#maxBody} bytes`);
    if (this.#body === undefined || this.#size + n > this.#body.length) {
      const bigger = this.#pool.take(Math.max(this.#size + n, (this.#body?.length ?? 0) * 2, 16 * 1024));
      if (this.#body !== undefined) {
        this.#body.copy(bigger, 0, 0, this.#size);
        this.#pool.give(this.#body);
      }
      this.#body = bigger;
    }
    buf.copy(this.#body, this.#size, from, to);
    this.#size += n;
  }

  #pushChunked(buf: Buffer, from: number, to: number): boolean {
    let data = buf;
    if (this.#raw !== undefined) {
      data = Buffer.concat([this.#raw, buf.subarray(from, to)]);
      from = 0;
      to = data.length;
      this.#raw = undefined;
    }
    while (from < to) {
      if (this.#chunkLeft > 0) {
        const take = Math.min(this.#chunkLeft, to - from);
        this.#add(data, from, from + take);
        this.#chunkLeft -= take;
        from += take;
        continue;
      }
      if (this.#chunkLeft === 0) {
        // The CRLF after a chunk's data.
        if (to - from < 2) break;
        from += 2;
        this.#chunkLeft = -1;
        continue;
      }
      const lineEnd = data.indexOf('\r\n', from);
      if (lineEnd < 0 || lineEnd >= to) break;
      const size = parseInt(data.toString('latin1', from, lineEnd).split(';')[0], 16);
      if (Number.isNaN(size)) throw new GetError('protocol', 'bad chunk size');
      if (size === 0) {
        // The last chunk; the trailers (usually none) end with an empty line.
        const rest = data.subarray(lineEnd + 2, to);
        if ((rest.length >= 2 && rest[0] === 13 && rest[1] === 10) || rest.indexOf(CRLF2) >= 0) return true;
        break;
      }
      this.#chunkLeft = size;
      from = lineEnd + 2;
    }
    if (from < to) this.#raw = Buffer.from(data.subarray(from, to));
    return false;
  }
}
