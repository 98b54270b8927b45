import { malformedAnswerError } from './errors';

/** Where a parsed answer goes. `head` and `body` return false to pause the parser (the rest of the read is held). */
export interface ResponseSink {
  /** A final head (1xx heads are skipped): status, reason, raw headers as name, value, … */
  head(status: number, statusText: string, rawHeaders: string[]): boolean;
  body(chunk: Buffer): boolean;
  /** The answer is complete; `excess`: bytes followed it in the same read (the connection cannot be trusted). */
  complete(excess: boolean): void;
}

/** node's default `--max-http-header-size`, which undici's parser uses too. */
export const MAX_HEAD_BYTES = 16 * 1024;
/** A chunk-size line or a trailer line longer than this is not an engine's answer. */
const MAX_LINE_BYTES = 4 * 1024;

const enum State {
  Head,
  Length,
  ChunkSize,
  ChunkData,
  ChunkDataEnd,
  Trailers,
  UntilClose,
  Done,
}

const HEAD_END = Buffer.from('\r\n\r\n', 'latin1');
const EMPTY = Buffer.alloc(0);
const STATUS_LINE = /^HTTP\/1\.([01]) (\d{3})(?: (.*))?$/;
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const DIGITS = /^\d+$/;
const HEX = /^[0-9A-Fa-f]{1,12}$/;
const KEEP_ALIVE_TIMEOUT = /(?:^|[,\s])timeout=(\d+)/i;

/**
 * An incremental HTTP/1.1 response parser for one answer at a time: a length, chunked (each chunk's data handed on
 * as it arrives, so an SSE stream is relayed event by event) or delimited by the close of the connection; 1xx
 * heads are skipped. Malformed input throws an H1Error with an llhttp-style `HPE_*` code. Body chunks are views of
 * the socket's buffers, not copies.
 */
export class ResponseParser {
  readonly #sink: ResponseSink;
  #state = State.Head;
  /** Head bytes (State.Head) of an incomplete read. */
  #partial: Buffer | undefined = undefined;
  /** A chunk-size or trailer line not complete yet. */
  #line = '';
  #remaining = 0;
  #crlf = 0;
  /** Unparsed bytes held while paused. */
  #held: Buffer | undefined = undefined;
  #paused = false;
  #halted = false;
  #executing = false;
  /** The answer allows the connection to carry another request. */
  keepAlive = true;
  /** The server's `Keep-Alive: timeout=` hint in ms, or -1. */
  keepAliveHintMs = -1;

  constructor(sink: ResponseSink) {
    this.#sink = sink;
  }

  /** Ready for the next answer on the same connection. */
  reset(): void {
    this.#state = State.Head;
    this.#partial = undefined;
    this.#line = '';
    this.#held = undefined;
    this.#paused = false;
    this.#halted = false;
    this.keepAlive = true;
    this.keepAliveHintMs = -1;
  }

  /** No more callbacks for this answer (it was aborted or failed). */
  halt(): void {
    this.#halted = true;
    this.#held = undefined;
  }

  get paused(): boolean {
    return this.#paused;
  }

  /** The answer is read until the connection closes (no length, not chunked). */
  get untilClose(): boolean {
    return this.#state === State.UntilClose;
  }

  /** The connection's read side ended: completes an answer delimited by the close; false when one was cut short. */
  finish(): boolean {
    if (this.#state !== State.UntilClose || this.#halted) return false;
    this.#state = State.Done;
    this.keepAlive = false;
    this.#sink.complete(false);
    return true;
  }

  /** Parses what is held from a pause, then goes on with new reads. */
  resume(): void {
    if (!this.#paused) return;
    this.#paused = false;
    if (!this.#executing) this.execute(EMPTY);
  }

  /** Parses `input` (throws on a malformed answer); stops early when the sink pauses, holding the rest. */
  execute(input: Buffer): void {
    let data = input;
    if (this.#held !== undefined) {
      data = input.length === 0 ? this.#held : Buffer.concat([this.#held, input]);
      this.#held = undefined;
    }
    this.#executing = true;
    try {
      let at = 0;
      while (at < data.length && !this.#halted) {
        if (this.#paused) {
          this.#held = data.subarray(at);
          return;
        }
        switch (this.#state) {
          case State.Head:
            at = this.#head(data, at);
            break;
          case State.Length: {
            const take = Math.min(this.#remaining, data.length - at);
            this.#remaining -= take;
            if (this.#remaining === 0) this.#state = State.Done;
            if (!this.#sink.body(at === 0 && take === data.length ? data : data.subarray(at, at + take))) this.#paused = true;
            at += take;
            break;
          }
          case State.ChunkSize:
            at = this.#chunkSize(data, at);
            break;
          case State.ChunkData: {
            const take = Math.min(this.#remaining, data.length - at);
            this.#remaining -= take;
            if (this.#remaining === 0) {
              this.#state = State.ChunkDataEnd;
              this.#crlf = 0;
            }
            if (!this.#sink.body(data.subarray(at, at + take))) this.#paused = true;
            at += take;
            break;
          }
          case State.ChunkDataEnd:
            at = this.#chunkDataEnd(data, at);
            break;
          case State.Trailers:
            at = this.#trailers(data, at);
            break;
          case State.UntilClose:
            if (!this.#sink.body(at === 0 ? data : data.subarray(at))) this.#paused = true;
            at = data.length;
            break;
          case State.Done:
            this.#state = State.Head;
            this.#halted = true;
            this.#sink.complete(true);
            return;
        }
      }
      if (this.#state === State.Done && !this.#halted) {
        this.#state = State.Head;
        this.#halted = true;
        this.#sink.complete(false);
      }
    } finally {
      this.#executing = false;
    }
  }

  #head(data: Buffer, at: number): number {
    let buf = data;
    let start = at;
    let from = at;
    const partial = this.#partial;
    if (partial !== undefined) {
      buf = Buffer.concat([partial, data.subarray(at)]);
      start = 0;
      from = Math.max(0, partial.length - 3);
    }
    const end = buf.indexOf(HEAD_END, from);
    if (end < 0) {
      if (buf.length - start > MAX_HEAD_BYTES) throw malformedAnswerError('HPE_HEADER_OVERFLOW', 'header overflow');
      this.#partial = start === 0 ? buf : buf.subarray(start);
      return data.length;
    }
    if (end - start > MAX_HEAD_BYTES) throw malformedAnswerError('HPE_HEADER_OVERFLOW', 'header overflow');
    this.#partial = undefined;
    const next = partial === undefined ? end + 4 : at + end + 4 - partial.length;
    this.#onHead(buf.toString('latin1', start, end));
    return next;
  }

  #onHead(text: string): void {
    const lines = text.split('\r\n');
    const status = STATUS_LINE.exec(lines[0]);
    if (status === null) throw malformedAnswerError('HPE_INVALID_CONSTANT', 'invalid status line');
    const code = Number(status[2]);
    if (code < 100) throw malformedAnswerError('HPE_INVALID_STATUS', 'invalid status code');
    const http10 = status[1] === '0';
    let contentLength = -1;
    let transferEncoding: string | undefined;
    let connection: string | undefined;
    const raw: string[] = [];
    for (let i = 1; i < lines.length; i++) {
      const line = lines[i];
      const colon = line.indexOf(':');
      if (colon <= 0) throw malformedAnswerError('HPE_INVALID_HEADER_TOKEN', 'invalid header line');
      const name = line.slice(0, colon);
      if (!TOKEN.test(name)) throw malformedAnswerError('HPE_INVALID_HEADER_TOKEN', 'invalid header name');
      const value = line.slice(colon + 1).trim();
      if (value.includes('\n') || value.includes('\r')) throw malformedAnswerError('HPE_INVALID_HEADER_TOKEN', 'invalid header value');
      raw.push(name, value);
      switch (name.length) {
        case 14:
          if (name.toLowerCase() !== 'content-length') break;
          if (!DIGITS.test(value) || (contentLength >= 0 && contentLength !== Number(value))) {
            throw malformedAnswerError('HPE_INVALID_CONTENT_LENGTH', 'invalid content-length');
          }
          contentLength = Number(value);
          break;
        case 17:
          if (name.toLowerCase() === 'transfer-encoding')
            transferEncoding = transferEncoding === undefined ? value : `${transferEncoding}, ${value}`;
          break;
        case 10: {
          const lower = name.toLowerCase();
          if (lower === 'connection') connection = connection === undefined ? value.toLowerCase() : `${connection}, ${value.toLowerCase()}`;
          else if (lower === 'keep-alive') {
            const hint = KEEP_ALIVE_TIMEOUT.exec(value);
            if (hint !== null) this.keepAliveHintMs = Number(hint[1]) * 1000;
          }
          break;
        }
      }
    }
    if (code < 200) {
      // 101 would switch protocols, which the legs never ask for; other 1xx heads precede the answer.
      if (code === 101) throw malformedAnswerError('HPE_INVALID_STATUS', 'unexpected 101 Switching Protocols');
      this.keepAliveHintMs = -1;
      return;
    }
    const tokens = connection === undefined ? '' : connection;
    this.keepAlive = http10 ? /(?:^|[\s,])keep-alive(?:$|[\s,])/.test(tokens) : !/(?:^|[\s,])close(?:$|[\s,])/.test(tokens);
    if (code === 204 || code === 304) {
      this.#state = State.Done;
    } else if (transferEncoding !== undefined) {
      if (contentLength >= 0) throw malformedAnswerError('HPE_UNEXPECTED_CONTENT_LENGTH', 'content-length with transfer-encoding');
      const codings = transferEncoding.toLowerCase();
      if (/(?:^|[\s,])chunked\s*$/.test(codings)) {
        this.#state = State.ChunkSize;
        this.#line = '';
      } else {
        this.#state = State.UntilClose;
        this.keepAlive = false;
      }
    } else if (contentLength >= 0) {
      this.#remaining = contentLength;
      this.#state = contentLength === 0 ? State.Done : State.Length;
    } else {
      this.#state = State.UntilClose;
      this.keepAlive = false;
    }
    if (!this.#sink.head(code, status[3] ?? '', raw)) this.#paused = true;
  }

  /** A complete line (without its CRLF) from `#line` and `data[at…]`, or undefined when the read ends first. */
  #lineFrom(data: Buffer, at: number): { line: string; next: number } | undefined {
    const nl = data.indexOf(10, at);
    if (nl < 0) {
      this.#line += data.toString('latin1', at);
      if (this.#line.length > MAX_LINE_BYTES) throw malformedAnswerError('HPE_CHUNK_EXTENSIONS_OVERFLOW', 'line too long');
      return undefined;
    }
    const line = this.#line + data.toString('latin1', at, nl);
    this.#line = '';
    if (line.length > MAX_LINE_BYTES) throw malformedAnswerError('HPE_CHUNK_EXTENSIONS_OVERFLOW', 'line too long');
    if (!line.endsWith('\r')) throw malformedAnswerError('HPE_LF_EXPECTED', 'line not ended by CRLF');
    return { line: line.slice(0, -1), next: nl + 1 };
  }

  #chunkSize(data: Buffer, at: number): number {
    const read = this.#lineFrom(data, at);
    if (read === undefined) return data.length;
    const semi = read.line.indexOf(';');
    const hex = (semi < 0 ? read.line : read.line.slice(0, semi)).trimEnd();
    if (!HEX.test(hex)) throw malformedAnswerError('HPE_INVALID_CHUNK_SIZE', 'invalid chunk size');
    const size = parseInt(hex, 16);
    if (size === 0) {
      this.#state = State.Trailers;
    } else {
      this.#remaining = size;
      this.#state = State.ChunkData;
    }
    return read.next;
  }

  #chunkDataEnd(data: Buffer, at: number): number {
    let i = at;
    while (i < data.length && this.#crlf < 2) {
      if (data[i] !== (this.#crlf === 0 ? 13 : 10)) throw malformedAnswerError('HPE_STRICT', 'chunk data not followed by CRLF');
      this.#crlf++;
      i++;
    }
    if (this.#crlf === 2) this.#state = State.ChunkSize;
    return i;
  }

  #trailers(data: Buffer, at: number): number {
    const read = this.#lineFrom(data, at);
    if (read === undefined) return data.length;
    if (read.line === '') this.#state = State.Done;
    else if (read.line.indexOf(':') <= 0) throw malformedAnswerError('HPE_INVALID_HEADER_TOKEN', 'invalid trailer line');
    return read.next;
  }
}
