import { connect, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';

/** One answer of a {@link RawHttpConnection}, with the time from the request's write to its last byte. */
export interface RawAnswer {
  readonly status: number;
  readonly body: string;
  readonly ms: number;
}

const HEADER_END = Buffer.from('\r\n\r\n');

/**
 * A kept-alive HTTP/1.1 connection that sends one POST at a time as a single write and reads a `content-length`
 * answer, with no client library between the socket and the clock: what wrk does per request, so a latency
 * measured here is the engine's round trip and not a client's bookkeeping. Answers without `content-length`
 * (chunked, SSE) are refused, not guessed.
 */
export class RawHttpConnection {
  readonly #host: string;
  readonly #port: number;
  #socket: Socket | undefined;
  #pending: { resolve: (a: RawAnswer) => void; reject: (e: Error) => void; startedAt: number } | undefined;
  #buffer: Buffer = Buffer.alloc(0);

  constructor(url: string) {
    const u = new URL(url);
    this.#host = u.hostname;
    this.#port = Number(u.port);
  }

  async post(path: string, body: string, headers: Readonly<Record<string, string>> = {}): Promise<RawAnswer> {
    if (this.#pending !== undefined) throw new Error('RawHttpConnection sends one request at a time');
    const socket = await this.#open();
    const extra = Object.entries(headers)
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('');
    const request =
      `POST ${path} HTTP/1.1\r\nhost: ${this.#host}:${this.#port}\r\ncontent-type: application/json\r\n` +
      `content-length: ${Buffer.byteLength(body)}\r\n${extra}\r\n${body}`;
    return new Promise<RawAnswer>((resolve, reject) => {
      this.#pending = { resolve, reject, startedAt: performance.now() };
      socket.write(request);
    });
  }

  close(): void {
    this.#socket?.destroy();
    this.#socket = undefined;
  }

  /** The open socket, or a new one when the server closed the last (an idle keep-alive timeout). */
  #open(): Promise<Socket> {
    const current = this.#socket;
    if (current !== undefined && !current.destroyed) return Promise.resolve(current);
    return new Promise<Socket>((resolve, reject) => {
      const socket = connect({ host: this.#host, port: this.#port, noDelay: true });
      socket.once('connect', () => {
        socket.off('error', reject);
        socket.on('error', (err) => this.#fail(socket, err));
        resolve(socket);
      });
      socket.once('error', reject);
      socket.on('data', (chunk: Buffer) => this.#read(socket, chunk));
      socket.on('close', () => this.#fail(socket, new Error(`connection to ${this.#host}:${this.#port} closed`)));
      this.#buffer = Buffer.alloc(0);
      this.#socket = socket;
    });
  }

  #read(socket: Socket, chunk: Buffer): void {
    if (socket !== this.#socket) return;
    const pending = this.#pending;
    this.#buffer = this.#buffer.length === 0 ? chunk : Buffer.concat([this.#buffer, chunk]);
    const end = this.#buffer.indexOf(HEADER_END);
    if (pending === undefined || end < 0) return;
    const head = this.#buffer.subarray(0, end).toString('latin1');
    const length = /\r\ncontent-length:\s*(\d+)/i.exec(head);
    if (length === null) {
      this.#fail(socket, new Error(`answer without content-length: ${head.split('\r\n')[0]}`));
      return;
    }
    const total = end + HEADER_END.length + Number(length[1]);
    if (this.#buffer.length < total) return;
    const ms = performance.now() - pending.startedAt;
    const body = this.#buffer.subarray(end + HEADER_END.length, total).toString('utf8');
    this.#buffer = this.#buffer.subarray(total);
    this.#pending = undefined;
    pending.resolve({ status: Number(head.slice(9, 12)), body, ms });
  }

  /** Events of a socket this connection already let go are not about the request in flight. */
  #fail(socket: Socket, err: Error): void {
    if (socket !== this.#socket) return;
    const pending = this.#pending;
    this.#pending = undefined;
    this.close();
    pending?.reject(err);
  }
}
