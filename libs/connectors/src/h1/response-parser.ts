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
const CR = 0x0d;
const LF = 0x0a;
const COLON = 0x3a;
const HEX = /^[0-9A-Fa-f]{1,12}$/;
const KEEP_ALIVE_TIMEOUT = /(?:^|[,\s])timeout=(\d+)/i;
const HAS_KEEP_ALIVE = /(?:^|[\s,])keep-alive(?:$|[\s,])/;
const HAS_CLOSE = /(?:^|[\s,])close(?:$|[\s,])/;
const CHUNKED_LAST = /(?:^|[\s,])chunked\s*$/;
/**
 * A head with no CR or LF but its line ends and every header name a token (what engines send): checked in one native
 * pass, its lines are then found with `indexOf` alone. A head it does not match is read character by character
 * (which gives the errors). A JavaScript loop over a string's characters costs about 25 instructions a character
 * (each `charCodeAt` dispatches on the string's representation), the regular expression about 10.
 */
const PLAIN_HEAD = /^HTTP\/1\.[01] \d{3}(?: [^\r\n]*)?(?:\r\n[!#$%&'*+\-.^_`|~0-9A-Za-z]+:[^\r\n]*)*$/;

/**
 * Token characters (RFC 9110 `tchar`: `/[!#$%&'*+\-.^_`|~0-9A-Za-z]/`) by character code; the head is latin1 text, so
 * no code is above 0xFF.
 */
const TOKEN_CHARS = new Uint8Array(256);
for (const c of "!#$%&'*+-.^_`|~") TOKEN_CHARS[c.charCodeAt(0)] = 1;
for (let c = 0x30; c <= 0x39; c++) TOKEN_CHARS[c] = 1;
for (let c = 0x41; c <= 0x5a; c++) TOKEN_CHARS[c] = 1;
for (let c = 0x61; c <= 0x7a; c++) TOKEN_CHARS[c] = 1;

/** Whether `text[0…end)`, holding no CR or LF, is `HTTP/1.<0|1> <3 digits>` with nothing or a space and a reason after. */
function isStatusLine(text: string, end: number): boolean {
  if (end < 12) return false;
  if (!text.startsWith('HTTP/1.')) return false;
  const minor = text.charCodeAt(7);
  if ((minor !== 0x30 && minor !== 0x31) || text.charCodeAt(8) !== 0x20) return false;
  if (!isDigit(text.charCodeAt(9)) || !isDigit(text.charCodeAt(10)) || !isDigit(text.charCodeAt(11))) return false;
  return end === 12 || text.charCodeAt(12) === 0x20;
}

function isDigit(c: number): boolean {
  return c >= 0x30 && c <= 0x39;
}

/** Whether `text[from…to)` is one or more ASCII digits (`/^\d+$/`). */
function isDigits(text: string, from: number, to: number): boolean {
  if (to <= from) return false;
  for (let i = from; i < to; i++) if (!isDigit(text.charCodeAt(i))) return false;
  return true;
}

/** What `String#trim` takes off a latin1 string's ends: HTAB, LF, VT, FF, CR, space and NBSP. */
function isTrimmed(c: number): boolean {
  return c === 0x20 || (c >= 0x09 && c <= 0x0d) || c === 0xa0;
}

/**
 * Whether the header name at `text[at…]`, as long as `lower` (lower-case letters and `-`), is `lower` in any case: a
 * name is a token, ASCII only, where a letter without its case bit is what `toLowerCase` would give.
 */
function isName(text: string, at: number, lower: string): boolean {
  for (let i = 0; i < lower.length; i++) {
    const l = lower.charCodeAt(i);
    const c = text.charCodeAt(at + i);
    if (c !== l && !(l >= 0x61 && l <= 0x7a && c === l - 0x20)) return false;
  }
  return true;
}

/** The error of a header line that is not `token:…`, as the line-by-line reading gave it: no colon first, else the name. */
function headLineError(text: string, start: number): Error {
  let end = text.indexOf('\r\n', start);
  if (end < 0) end = text.length;
  const colon = text.indexOf(':', start);
  if (colon <= start || colon >= end) return malformedAnswerError('HPE_INVALID_HEADER_TOKEN', 'invalid header line');
  return malformedAnswerError('HPE_INVALID_HEADER_TOKEN', 'invalid header name');
}

/** The `timeout=` seconds of a Keep-Alive value, as KEEP_ALIVE_TIMEOUT finds them; the usual `timeout=N…` first read directly. */
function keepAliveTimeout(value: string): number | undefined {
  if (value.startsWith('timeout=')) {
    let end = 8;
    while (end < value.length && isDigit(value.charCodeAt(end))) end++;
    // At the start the regular expression's leftmost match is this one.
    if (end > 8) return Number(value.slice(8, end));
  }
  const hint = KEEP_ALIVE_TIMEOUT.exec(value);
  return hint === null ? undefined : Number(hint[1]);
}

/** Whether the connection may carry another request after this answer, by its version and `Connection` tokens. */
function keepsConnection(http10: boolean, connection: string | undefined): boolean {
  // No header, or the one token engines send: no regular expression needed.
  if (connection === undefined || connection === '') return !http10;
  if (connection === 'keep-alive') return true;
  return http10 ? HAS_KEEP_ALIVE.test(connection) : !HAS_CLOSE.test(connection);
}

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

  /**
   * Reads a head (the text before its blank line) without splitting it: each line's end is found with `indexOf`, its
   * name's token characters (unless PLAIN_HEAD vouched for them) and its value's trimmed ends by character codes, and
   * only the status reason, the names and the values become strings (slices). It replaced splitting the head into lines and testing each with regular
   * expressions (once per leg). The rules are the line-by-line reading's, which response-parser.test.ts keeps
   * as its reference: the same headers, the same errors in the same order. The helpers it calls are this module's:
   * under tsx's CommonJS interop a call into another module reads the function through a getter, a megamorphic load.
   */
  #onHead(text: string): void {
    const length = text.length;
    const plain = PLAIN_HEAD.test(text);
    let lineEnd = 0;
    let bare = false;
    if (plain) {
      lineEnd = text.indexOf('\r\n');
      if (lineEnd < 0) lineEnd = length;
    } else {
      while (lineEnd < length) {
        const c = text.charCodeAt(lineEnd);
        if (c === CR) {
          if (lineEnd + 1 < length && text.charCodeAt(lineEnd + 1) === LF) break;
          bare = true;
        } else if (c === LF) {
          bare = true;
        }
        lineEnd++;
      }
      // `HTTP/1.<0|1> <3 digits>[ <reason>]`, no CR or LF anywhere in it (the rule of /^HTTP\/1\.([01]) (\d{3})(?: (.*))?$/).
      if (bare || !isStatusLine(text, lineEnd)) throw malformedAnswerError('HPE_INVALID_CONSTANT', 'invalid status line');
    }
    const statusText = lineEnd > 12 ? text.slice(13, lineEnd) : '';
    const code = (text.charCodeAt(9) - 0x30) * 100 + (text.charCodeAt(10) - 0x30) * 10 + (text.charCodeAt(11) - 0x30);
    if (code < 100) throw malformedAnswerError('HPE_INVALID_STATUS', 'invalid status code');
    const http10 = text.charCodeAt(7) === 0x30;
    let contentLength = -1;
    let transferEncoding: string | undefined;
    let connection: string | undefined;
    const raw: string[] = [];
    // Every CRLF starts a line (an empty one too, as splitting the head at each CRLF would give).
    for (let at = lineEnd; at < length;) {
      const start = at + 2;
      let colon: number;
      if (plain) {
        // A token then a colon: the first colon ends the name.
        colon = text.indexOf(':', start);
      } else {
        colon = start;
        while (colon < length && TOKEN_CHARS[text.charCodeAt(colon)] === 1) colon++;
        if (colon === start || colon === length || text.charCodeAt(colon) !== COLON) throw headLineError(text, start);
      }
      // The value runs to the next CRLF; a CR or LF before it stands alone (native searches: a loop over the
      // value's characters costs more).
      let end = text.indexOf('\r\n', colon + 1);
      if (end < 0) end = length;
      if (!plain) {
        const firstCr = text.indexOf('\r', colon + 1);
        const firstLf = text.indexOf('\n', colon + 1);
        bare = (firstCr >= 0 && firstCr < end) || (firstLf >= 0 && firstLf < end);
      }
      at = end;
      // The value without the whitespace `String#trim` takes off its ends, and no CR or LF left inside it.
      let from = colon + 1;
      let to = end;
      while (from < to && isTrimmed(text.charCodeAt(from))) from++;
      while (to > from && isTrimmed(text.charCodeAt(to - 1))) to--;
      if (bare) {
        const lf = text.indexOf('\n', from);
        const cr = text.indexOf('\r', from);
        if ((lf >= 0 && lf < to) || (cr >= 0 && cr < to)) throw malformedAnswerError('HPE_INVALID_HEADER_TOKEN', 'invalid header value');
      }
      const name = text.slice(start, colon);
      const value = text.slice(from, to);
      raw.push(name, value);
      switch (colon - start) {
        case 14: {
          if (!isName(text, start, 'content-length')) break;
          const declared = isDigits(text, from, to) ? Number(value) : -1;
          if (declared < 0 || (contentLength >= 0 && contentLength !== declared)) {
            throw malformedAnswerError('HPE_INVALID_CONTENT_LENGTH', 'invalid content-length');
          }
          contentLength = declared;
          break;
        }
        case 17:
          if (isName(text, start, 'transfer-encoding'))
            transferEncoding = transferEncoding === undefined ? value : `${transferEncoding}, ${value}`;
          break;
        case 10:
          if (isName(text, start, 'connection')) {
            const lower = value === 'keep-alive' || value === 'close' ? value : value.toLowerCase();
            connection = connection === undefined ? lower : `${connection}, ${lower}`;
          } else if (isName(text, start, 'keep-alive')) {
            const hintSeconds = keepAliveTimeout(value);
            if (hintSeconds !== undefined) this.keepAliveHintMs = hintSeconds * 1000;
          }
          break;
      }
    }
    if (code < 200) {
      // 101 would switch protocols, which the legs never ask for; other 1xx heads precede the answer.
      if (code === 101) throw malformedAnswerError('HPE_INVALID_STATUS', 'unexpected 101 Switching Protocols');
      this.keepAliveHintMs = -1;
      return;
    }
    this.keepAlive = keepsConnection(http10, connection);
    if (code === 204 || code === 304) {
      this.#state = State.Done;
    } else if (transferEncoding !== undefined) {
      if (contentLength >= 0) throw malformedAnswerError('HPE_UNEXPECTED_CONTENT_LENGTH', 'content-length with transfer-encoding');
      if (CHUNKED_LAST.test(transferEncoding.toLowerCase())) {
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
    if (!this.#sink.head(code, statusText, raw)) this.#paused = true;
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
