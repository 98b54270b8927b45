import { STATUS_CODES, createServer, type IncomingMessage, type RequestListener, type Server, type ServerResponse } from 'node:http';
import type { Duplex, Readable } from 'node:stream';
import { ErrorCode } from '@triad/errors';
import { BadRequestError, BodyTooLargeError, HttpLayerError, toOpenAiError } from '@triad/request';
import { isRefusedConnection, type ClientConnectionCap } from './client-connection-cap';

/**
 * The HTTP layer under fastify, where node itself would answer: malformed requests, header overflow, request
 * timeouts, a missing Host, `Expect`, and bodies over the limit. Node's own answers there are bare
 * (`400 Bad Request` without a body, `417` without a body); these are OpenAI-shaped like every other error.
 */

/** An OpenAI-shaped error answer: status, headers (framing included) and body. */
export interface ErrorAnswer {
  readonly status: number;
  readonly headers: Record<string, string | number>;
  readonly body: string;
}

/**
 * The one error answer every writer below sends. `close` ends the connection after it; a 413 always does, since
 * the rest of the body may still be on the wire and the connection cannot carry another request.
 */
export function errorAnswer(err: unknown, close = false): ErrorAnswer {
  const e = toOpenAiError(err);
  const headers: Record<string, string | number> = { 'content-type': 'application/json', 'content-length': Buffer.byteLength(e.body) };
  if (close || e.status === 413) headers['connection'] = 'close';
  return { status: e.status, headers: { ...headers, ...e.headers }, body: e.body };
}

/** The bytes of a complete error response that closes the connection (for sockets no ServerResponse owns). */
export function rawErrorResponse(err: unknown): string {
  const a = errorAnswer(err, true);
  let head = `HTTP/1.1 ${a.status} ${STATUS_CODES[a.status] ?? 'Error'}\r\n`;
  for (const [name, value] of Object.entries(a.headers)) head += `${name}: ${value}\r\n`;
  return `${head}\r\n${a.body}`;
}

/** Writes an error on a ServerResponse nothing was sent on yet; `close` ends the connection after it. */
export function writeError(res: ServerResponse, err: unknown, close = false): void {
  if (res.headersSent || res.destroyed) return;
  const a = errorAnswer(err, close);
  res.writeHead(a.status, a.headers);
  res.end(a.body);
}

/** What a parse error of node's HTTP parser (or its timeouts) means for the client. */
export function clientErrorOf(err: NodeJS.ErrnoException): HttpLayerError | BadRequestError {
  const code = err.code ?? '';
  if (code === 'HPE_HEADER_OVERFLOW') {
    return new HttpLayerError(ErrorCode.GatewayHeadersTooLarge, 'request headers are larger than the gateway accepts');
  }
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT' || code === 'ERR_HTTP_HEADERS_TIMEOUT') {
    return new HttpLayerError(ErrorCode.GatewayRequestTimeout, 'the request was not received in time');
  }
  // llhttp's reason ("Invalid header value char") names the fault without repeating the client's bytes.
  const given = (err as { reason?: unknown }).reason;
  const reason = typeof given === 'string' ? given : 'malformed request';
  return new BadRequestError(`malformed HTTP request: ${reason}${code.startsWith('HPE_') ? ` (${code})` : ''}`);
}

/** Set on a socket once its parse error is being answered (the parser reports the same fault for every later chunk). */
const CLIENT_ERROR_SEEN = Symbol('triad.clientErrorSeen');

type ClientSocket = Duplex & { _httpMessage?: ServerResponse | null; [CLIENT_ERROR_SEEN]?: boolean };

function answerAndClose(socket: Duplex, err: NodeJS.ErrnoException): void {
  if (socket.destroyed) return;
  if (socket.writable) socket.end(rawErrorResponse(clientErrorOf(err)));
  else socket.destroy();
}

/**
 * fastify's `clientErrorHandler`: an OpenAI-shaped answer for what node's parser refused, then close. When an
 * earlier pipelined request on the connection is still being answered, its answer goes out first and the error
 * after it: answers keep the order of the requests, so the error is never read as the answer to a valid request
 * (node's own handler writes it in that answer's place, and drops the answer).
 */
export function onClientError(err: NodeJS.ErrnoException, socket: Duplex): void {
  const s = socket as ClientSocket;
  if (err.code === 'ECONNRESET' || socket.destroyed || s[CLIENT_ERROR_SEEN] === true) return;
  s[CLIENT_ERROR_SEEN] = true;
  const inflight = s._httpMessage;
  if (inflight === undefined || inflight === null || inflight.writableFinished) {
    answerAndClose(socket, err);
    return;
  }
  if (!inflight.req.complete) {
    // The fault is in the body of the request being answered (bad chunk framing): it gets the error, if nothing
    // of its answer went out yet.
    if (inflight.headersSent) socket.destroy();
    else answerAndClose(socket, err);
    return;
  }
  inflight.once('finish', () => answerAndClose(socket, err));
  inflight.once('close', () => {
    if (!inflight.writableFinished) socket.destroy();
  });
}

export interface HttpLayerOptions {
  readonly bodyLimit: number;
  /** How many bytes of an oversized body are read and dropped before the 413, so the client reads it. */
  readonly discardLimit: number;
  /** node's `keepAliveTimeout`: how long a connection may stay idle between requests. */
  readonly keepAliveTimeoutMs: number;
  /** node's `headersTimeout`: a request head not complete this long after its first byte gets a 408 and the close. */
  readonly headersTimeoutMs: number;
  /**
   * node's `requestTimeout`: a request (head and body) not received this long after its first byte gets a 408
   * and the close. Receiving only: an answer being written (a stream) is not timed by it.
   */
  readonly requestTimeoutMs: number;
  /** Open connections per client address; the same cap for every server of the gateway. */
  readonly connectionCap?: ClientConnectionCap | undefined;
  /** The gateway is shutting down: requests still arriving on open connections get a 503 and the connection closes. */
  readonly draining: () => boolean;
}

/** Takes the requests it serves on node:http directly (true); the rest go to fastify's handler. */
export type RequestTakerFn = (req: IncomingMessage, res: ServerResponse) => boolean;

function contentLengthOf(req: IncomingMessage): number {
  const raw = req.headers['content-length'];
  return raw === undefined ? -1 : Number(raw);
}

/** A request on a connection the cap answered 429 when it connected: what it sends is read and dropped. */
function droppedAsRefused(req: IncomingMessage): boolean {
  if (!isRefusedConnection(req.socket)) return false;
  req.resume();
  return true;
}

/**
 * The server fastify runs on; `direct` takes the requests it serves before fastify sees them. Differences from node's defaults: a missing `Host` on HTTP/1.1 is answered here
 * (OpenAI-shaped 400) rather than by node (bare 400); `Expect: 100-continue` with a body over the limit gets its
 * 413 at once (the client never sends the body), other expectations an OpenAI-shaped 417; while draining, a new
 * request gets an OpenAI-shaped 503 (fastify's own would not be) so the client's retry goes to another replica.
 * The header, request and keep-alive timeouts are the gateway's settings (node's are 60 s, 300 s, 5 s); a client
 * address over `connectionCap` is answered 429 when it connects (client-connection-cap.ts).
 */
export function createGatewayServer(handler: RequestListener, options: HttpLayerOptions, direct?: RequestTakerFn): Server {
  const onRequest = (req: IncomingMessage, res: ServerResponse): void => {
    if (droppedAsRefused(req)) return;
    if (req.headers.host === undefined && req.httpVersionMajor === 1 && req.httpVersionMinor >= 1) {
      // The body (if any) is not read: the connection closes after the answer.
      writeError(res, new BadRequestError('HTTP/1.1 requests must carry a Host header'), true);
      return;
    }
    if (options.draining()) {
      writeError(res, new HttpLayerError(ErrorCode.GatewayDraining, 'the gateway is shutting down; retry on another replica'), true);
      return;
    }
    if (direct?.(req, res) !== true) handler(req, res);
  };
  const server = createServer(
    {
      requireHostHeader: false,
      headersTimeout: options.headersTimeoutMs,
      requestTimeout: options.requestTimeoutMs,
      keepAliveTimeout: options.keepAliveTimeoutMs,
      connectionsCheckingInterval: connectionsCheckingIntervalOf(options.headersTimeoutMs),
    },
    onRequest,
  );
  options.connectionCap?.attach(server);
  server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => {
    if (droppedAsRefused(req)) return;
    if (contentLengthOf(req) > options.bodyLimit) {
      writeError(res, bodyTooLarge(options.bodyLimit), true);
      return;
    }
    res.writeContinue();
    server.emit('request', req, res);
  });
  server.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) => {
    if (droppedAsRefused(req)) return;
    writeError(
      res,
      new HttpLayerError(ErrorCode.GatewayExpectationFailed, "the only expectation the gateway supports is 'Expect: 100-continue'"),
      true,
    );
    req.resume();
  });
  return server;
}

/**
 * How often node looks for requests over their header or request timeout (its default is 30 s, which would let a
 * 10 s header timeout act at up to 40 s): a tenth of the header timeout, from 25 ms to 1 s, so a timeout acts at
 * most 10% (and 1 s) late. A check walks only the connections receiving a request.
 */
export function connectionsCheckingIntervalOf(headersTimeoutMs: number): number {
  return Math.min(1_000, Math.max(25, Math.floor(headersTimeoutMs / 10)));
}

/** The raw answer of a connection over the per-client cap (written before its request is read; closes it). */
export function tooManyConnectionsResponse(maxPerClient: number): string {
  return rawErrorResponse(
    new HttpLayerError(
      ErrorCode.GatewayTooManyConnections,
      `too many open connections from this client address (the gateway allows ${maxPerClient}, setting ` +
        'max-connections-per-client); close idle connections or reuse them',
    ),
  );
}

export function bodyTooLarge(limit: number): BodyTooLargeError {
  return new BodyTooLargeError(`request body is larger than the gateway accepts (${limit} bytes, setting body-limit)`);
}

/** Marks the request so the error handler closes the connection after its answer. */
export const CLOSE_AFTER = Symbol('triad.closeAfter');

/**
 * Reads a request body into one Buffer, up to `bodyLimit`. A larger body (by `content-length` or as it arrives)
 * is read on and dropped, up to `discardLimit` bytes in all, before the 413 is answered: a client still sending
 * when the server answers and closes gets EPIPE / ECONNRESET instead of the 413 (node:http, fetch, and the
 * `openai` SDK, which then uploads the whole body again). Past `discardLimit` the 413 goes out at once and the
 * connection is closed; a 413 always closes the connection (`Connection: close`).
 */
export function readBody(
  req: IncomingMessage & { [CLOSE_AFTER]?: boolean },
  payload: Readable,
  options: HttpLayerOptions,
  done: (err: Error | null, body?: Buffer) => void,
): void {
  const declared = contentLengthOf(req);
  const read = new BodyRead(req, payload, options, declared > options.bodyLimit, done);
  if (read.tooLarge && declared > options.discardLimit) {
    read.refuse();
    return;
  }
  (payload as Reading)[BODY_READ] = read;
  payload.on('data', onBodyData);
  payload.on('end', onBodyEnd);
  payload.on('error', onBodyError);
}

/** The read in progress of a body stream (its listeners are module functions: nothing is created per request but this). */
const BODY_READ = Symbol('triad.bodyRead');
type Reading = Readable & { [BODY_READ]?: BodyRead };

function onBodyData(this: Reading, chunk: Buffer): void {
  this[BODY_READ]?.data(chunk);
}

function onBodyEnd(this: Reading): void {
  this[BODY_READ]?.end();
}

function onBodyError(this: Reading, err: Error): void {
  this[BODY_READ]?.finish(err);
}

/** One body being read by `readBody`. */
class BodyRead {
  readonly #chunks: Buffer[] = [];
  #received = 0;
  #finished = false;

  constructor(
    readonly req: IncomingMessage & { [CLOSE_AFTER]?: boolean },
    readonly payload: Readable,
    readonly options: HttpLayerOptions,
    public tooLarge: boolean,
    readonly done: (err: Error | null, body?: Buffer) => void,
  ) {}

  data(chunk: Buffer): void {
    this.#received += chunk.length;
    if (!this.tooLarge && this.#received > this.options.bodyLimit) {
      this.tooLarge = true;
      this.#chunks.length = 0;
    }
    if (!this.tooLarge) this.#chunks.push(chunk);
    else if (this.#received > this.options.discardLimit) this.refuse();
  }

  end(): void {
    if (this.tooLarge) this.refuse();
    else {
      const chunks = this.#chunks;
      this.finish(null, chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, this.#received));
    }
  }

  refuse(): void {
    this.req[CLOSE_AFTER] = true;
    this.finish(bodyTooLarge(this.options.bodyLimit));
  }

  finish(err: Error | null, body?: Buffer): void {
    if (this.#finished) return;
    this.#finished = true;
    const payload = this.payload as Reading;
    payload.off('data', onBodyData);
    payload.off('end', onBodyEnd);
    payload.off('error', onBodyError);
    payload[BODY_READ] = undefined;
    this.done(err, body);
  }
}
