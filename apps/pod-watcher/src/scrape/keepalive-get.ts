import { connect, type Socket } from 'node:net';

/** A GET answer: status and the whole body. */
export interface GetAnswer {
  readonly status: number;
  readonly body: Buffer;
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

interface Origin {
  readonly key: string;
  readonly host: string;
  readonly port: number;
  readonly hostHeader: string;
  readonly idle: Socket[];
  /** Requests on this origin (running or waiting); the origin is kept while any is. */
  active: number;
  /** Settles when the last request queued on this origin is done: one request at a time, on one socket. */
  tail: Promise<void>;
}

const CRLF2 = Buffer.from('\r\n\r\n');
const idleSince = new WeakMap<Socket, number>();

/**
 * Plain-HTTP GETs over kept-alive sockets, one request per socket at a time: what scraping thousands of engines
 * every second needs and no more. A general client (undici) spends several times the CPU per request on things
 * a scrape does not use (dispatchers, abort signals, header objects, streams); here a request is one write of a
 * prebuilt head and the answer is framed by Content-Length or chunked encoding straight from the socket's
 * buffers. Requests to one engine take turns on one socket (10,000 engines are 10,000 descriptors, not twice
 * that). A kept-alive socket the engine closed meanwhile gets the request again on a new socket, once.
 */
export class KeepAliveGet {
  readonly #origins = new Map<string, Origin>();
  readonly #keepAliveMs: number;
  readonly #sweep: NodeJS.Timeout;
  #closed = false;

  constructor(options: { keepAliveMs: number }) {
    this.#keepAliveMs = options.keepAliveMs;
    this.#sweep = setInterval(() => this.#closeIdle(Date.now() - this.#keepAliveMs), Math.max(1000, this.#keepAliveMs / 3));
    this.#sweep.unref();
  }

  /** `url` is `http://host:port/path`. Rejects with a {@link GetError}. */
  async get(url: string, opts: { timeoutMs: number; maxBodyBytes: number; accept: string }): Promise<GetAnswer> {
    if (this.#closed) throw new GetError('connect', 'client closed');
    const slash = url.indexOf('/', 7);
    const originKey = slash < 0 ? url : url.slice(0, slash);
    const path = slash < 0 ? '/' : url.slice(slash);
    const origin = this.#origin(originKey);
    const head = Buffer.from(
      `GET ${path} HTTP/1.1\r\nHost: ${origin.hostHeader}\r\nAccept: ${opts.accept}\r\nUser-Agent: triad-pod-watcher\r\n\r\n`,
      'latin1',
    );
    const deadline = Date.now() + opts.timeoutMs;
    // One request at a time per engine (a models read waits for the metrics scrape): one socket, one descriptor.
    const previous = origin.tail;
    let release: () => void = () => undefined;
    origin.tail = new Promise<void>((resolve) => {
      release = resolve;
    });
    origin.active += 1;
    try {
      await previous;
      if (Date.now() >= deadline)
        throw new GetError('timeout', `no answer within ${opts.timeoutMs} ms (queued behind the previous request)`);
      let socket = this.#take(origin);
      if (socket) {
        try {
          return await this.#exchange(origin, socket, head, deadline, opts.maxBodyBytes, true);
        } catch (err) {
          // The engine closed the kept-alive socket before reading the request: ask again on a new one.
          if (!(err instanceof GetError && err.code === 'STALE')) throw err;
        }
      }
      socket = connect({ host: origin.host, port: origin.port, noDelay: true });
      // An idle socket's error (the engine went away) only closes it; a request's own listener reports it.
      socket.on('error', ignore);
      return await this.#exchange(origin, socket, head, deadline, opts.maxBodyBytes, false);
    } finally {
      origin.active -= 1;
      release();
    }
  }

  close(): void {
    this.#closed = true;
    clearInterval(this.#sweep);
    this.#closeIdle(Infinity);
  }

  #origin(key: string): Origin {
    let o = this.#origins.get(key);
    if (o) return o;
    const hostPort = key.slice(key.indexOf('//') + 2);
    const colon = hostPort.lastIndexOf(':');
    const bracketed = hostPort.startsWith('[');
    const host = colon > hostPort.lastIndexOf(']') ? hostPort.slice(0, colon) : hostPort;
    const port = colon > hostPort.lastIndexOf(']') ? Number(hostPort.slice(colon + 1)) : 80;
    o = { key, host: bracketed ? host.slice(1, -1) : host, port, hostHeader: hostPort, idle: [], active: 0, tail: Promise.resolve() };
    this.#origins.set(key, o);
    return o;
  }

  #take(origin: Origin): Socket | undefined {
    for (let s = origin.idle.pop(); s; s = origin.idle.pop()) {
      if (!s.destroyed && s.readable && s.writable) return s;
    }
    return undefined;
  }

  #closeIdle(before: number): void {
    for (const [key, o] of this.#origins) {
      for (let i = o.idle.length - 1; i >= 0; i--) {
        const s = o.idle[i] as Socket;
        if ((idleSince.get(s) ?? 0) <= before || s.destroyed) {
          o.idle.splice(i, 1);
          s.destroy();
        }
      }
      if (o.idle.length === 0 && o.active === 0) this.#origins.delete(key);
    }
  }

  #park(origin: Origin, socket: Socket): void {
    if (this.#closed) {
      socket.destroy();
      return;
    }
    idleSince.set(socket, Date.now());
    origin.idle.push(socket);
    if (!this.#origins.has(origin.key)) this.#origins.set(origin.key, origin);
  }

  #exchange(origin: Origin, socket: Socket, head: Buffer, deadline: number, maxBody: number, reused: boolean): Promise<GetAnswer> {
    return new Promise<GetAnswer>((resolve, reject) => {
      const reader = new AnswerReader(maxBody);
      let gotBytes = false;
      let settled = false;
      const finish = (err: GetError | undefined, answer?: GetAnswer, keep = false) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        socket.off('data', onData);
        socket.off('error', onError);
        socket.off('end', onEnd);
        socket.off('close', onClose);
        if (keep) {
          this.#park(origin, socket);
        } else {
          socket.destroy();
        }
        if (err) reject(err);
        else resolve(answer as GetAnswer);
      };
      const onData = (chunk: Buffer) => {
        gotBytes = true;
        let done: ReturnType<AnswerReader['push']>;
        try {
          done = reader.push(chunk);
        } catch (err) {
          finish(err as GetError);
          return;
        }
        if (done) finish(undefined, { status: reader.status, body: done.body }, done.keepAlive);
      };
      const onError = (err: NodeJS.ErrnoException) => {
        const stale = reused && !gotBytes && /ECONNRESET|EPIPE/.test(err.code ?? '');
        finish(new GetError('connect', err.message, stale ? 'STALE' : err.code));
      };
      const onEnd = () => {
        const body = reader.end();
        if (body) finish(undefined, { status: reader.status, body });
        else if (reused && !gotBytes) finish(new GetError('connect', 'connection closed by the engine', 'STALE'));
        else finish(new GetError('protocol', 'connection closed before the answer was complete'));
      };
      const onClose = () => onEnd();
      const timer = setTimeout(
        () => finish(new GetError('timeout', `no complete answer within ${Math.max(0, deadline - Date.now() + 1)} ms`)),
        Math.max(1, deadline - Date.now()),
      );
      socket.on('data', onData);
      socket.on('error', onError);
      socket.on('end', onEnd);
      socket.on('close', onClose);
      socket.write(head);
    });
  }
}

function ignore(): void {
  return undefined;
}

/**
 * Frames one HTTP/1.1 answer from socket chunks: status line and headers, then a body by Content-Length, chunked
 * encoding, or up to the end of the connection.
 */
class AnswerReader {
  status = 0;
  readonly #maxBody: number;
  #head: Buffer | undefined = Buffer.alloc(0);
  #length = -1;
  #chunked = false;
  #keepAlive = true;
  readonly #parts: Buffer[] = [];
  #size = 0;
  /** Chunked: undecoded bytes. */
  #raw: Buffer = Buffer.alloc(0);

  constructor(maxBody: number) {
    this.#maxBody = maxBody;
  }

  /** The body once complete (and whether the socket can serve another request), else undefined. */
  push(chunk: Buffer): { body: Buffer; keepAlive: boolean } | undefined {
    if (this.#head !== undefined) {
      const buf = this.#head.length === 0 ? chunk : Buffer.concat([this.#head, chunk]);
      const end = buf.indexOf(CRLF2);
      if (end < 0) {
        if (buf.length > 64 * 1024) throw new GetError('protocol', 'answer headers larger than 64 KB');
        this.#head = buf;
        return undefined;
      }
      this.#head = undefined;
      this.#readHead(buf.toString('latin1', 0, end));
      chunk = buf.subarray(end + 4);
      if (this.#length === 0) return { body: Buffer.alloc(0), keepAlive: this.#keepAlive && chunk.length === 0 };
    }
    if (this.#chunked) return this.#pushChunked(chunk);
    if (chunk.length > 0) this.#add(chunk);
    if (this.#length >= 0 && this.#size >= this.#length) {
      if (this.#size > this.#length) throw new GetError('protocol', 'more bytes than Content-Length');
      return { body: this.#body(), keepAlive: this.#keepAlive };
    }
    return undefined;
  }

  /** At the end of the connection: the body when it was delimited by the close, else undefined. */
  end(): Buffer | undefined {
    return this.#head === undefined && !this.#chunked && this.#length < 0 ? this.#body() : undefined;
  }

  #readHead(text: string): void {
    const lines = text.split('\r\n');
    const m = /^HTTP\/1\.([01]) (\d{3})/.exec(lines[0] ?? '');
    if (!m) throw new GetError('protocol', `not an HTTP/1.x answer: ${JSON.stringify((lines[0] ?? '').slice(0, 60))}`);
    this.status = Number(m[2]);
    this.#keepAlive = m[1] === '1';
    for (let i = 1; i < lines.length; i++) {
      const line = lines[i] as string;
      const colon = line.indexOf(':');
      if (colon <= 0) continue;
      const name = line.slice(0, colon).trim().toLowerCase();
      const value = line
        .slice(colon + 1)
        .trim()
        .toLowerCase();
      if (name === 'content-length') this.#length = Number(value);
      else if (name === 'transfer-encoding')
        this.#chunked = value
          .split(',')
          .map((v) => v.trim())
          .includes('chunked');
      else if (name === 'connection') this.#keepAlive = value.includes('keep-alive') || (this.#keepAlive && !value.includes('close'));
    }
    if (this.#chunked) this.#length = -1;
    if (this.status === 204 || this.status === 304) this.#length = 0;
    if (Number.isNaN(this.#length) || this.#length > this.#maxBody) throw new GetError('too-large', `Content-Length ${this.#length}`);
    if (this.#length < 0 && !this.#chunked) this.#keepAlive = false;
  }

  #add(chunk: Buffer): void {
    this.#size += chunk.length;
    if (this.#size > this.#maxBody) throw new GetError('too-large', `body larger than ${this.#maxBody} bytes`);
    this.#parts.push(chunk);
  }

  #body(): Buffer {
    return this.#parts.length === 1 ? (this.#parts[0] as Buffer) : Buffer.concat(this.#parts, this.#size);
  }

  #pushChunked(chunk: Buffer): { body: Buffer; keepAlive: boolean } | undefined {
    let raw = this.#raw.length === 0 ? chunk : Buffer.concat([this.#raw, chunk]);
    for (;;) {
      const lineEnd = raw.indexOf('\r\n');
      if (lineEnd < 0) break;
      const size = parseInt(raw.toString('latin1', 0, lineEnd).split(';')[0] as string, 16);
      if (Number.isNaN(size)) throw new GetError('protocol', 'bad chunk size');
      if (size === 0) {
        // Trailers (usually none) end with an empty line.
        const end = raw.indexOf(CRLF2, lineEnd - 2 >= 0 ? lineEnd - 2 : 0);
        if (raw.length >= lineEnd + 4 && raw[lineEnd + 2] === 13 && raw[lineEnd + 3] === 10)
          return { body: this.#body(), keepAlive: this.#keepAlive };
        if (end >= 0) return { body: this.#body(), keepAlive: this.#keepAlive };
        break;
      }
      if (raw.length < lineEnd + 2 + size + 2) break;
      this.#add(raw.subarray(lineEnd + 2, lineEnd + 2 + size));
      raw = raw.subarray(lineEnd + 2 + size + 2);
    }
    this.#raw = raw;
    return undefined;
  }
}
