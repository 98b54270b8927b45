import { subscribe } from 'node:diagnostics_channel';
import type { Socket } from 'node:net';

/**
 * Which socket a request was written on, and whether that socket had carried a request before.
 *
 * A kept-alive socket can be closed by the engine (its idle timeout) just as the gateway writes the next request on
 * it: the request then fails with ECONNRESET, EPIPE or "other side closed" though the engine never saw it. Go's
 * HTTP transport retries exactly that case (a reused connection, nothing read back); so does the leg
 * (`Leg.onResponseError`), which needs to know the socket. The gateway's own client (h1/) hands it over
 * (`socketAssigned`, right after `onConnect`). undici does not tell a dispatch handler its socket, but
 * publishes `undici:client:sendHeaders` (with the socket) synchronously right after calling the handler's
 * `onRequestStart`, in the same call: the leg announces itself there, and the next publication is its own.
 */
export interface SocketUse {
  readonly socket: Socket;
  /** The socket carried an earlier request (a kept-alive connection taken from the pool). */
  readonly reused: boolean;
  /** The socket's bytes read when this request was written: unchanged at a failure means nothing came back. */
  readonly bytesReadAtStart: number;
  /** How long the socket sat unused before this request (since the last request on it settled; 0 if unknown). */
  readonly idleMs: number;
}

/**
 * A reused socket that sat idle at least this long before a request may have met the engine's idle timeout. Engines
 * close idle sockets after seconds (vLLM's and SGLang's uvicorn: 5 s); a socket reused at once that then fails was
 * closed by an engine that read the request (a crash, a reset), and sending it there again would run it twice.
 */
export const IDLE_CLOSE_RACE_MS = 1_000;

/** Told which socket its request is being written on. */
export interface SocketUseListener {
  socketAssigned(use: SocketUse): void;
}

/**
 * When the last request on each socket settled (performance.now()). A socket with an entry carried a request
 * before: that is all `reused` means (one request at a time per socket, no pipelining).
 */
const idleSince = new WeakMap<Socket, number>();
/** The handler whose request undici is writing right now (set in its `onRequestStart`), and that request's origin. */
let writing: SocketUseListener | undefined;
let writingOrigin = '';
let subscribed = false;

interface SendHeadersMessage {
  readonly request?: { readonly origin?: unknown };
  readonly socket?: Socket;
}

/**
 * Every undici request of the process publishes here (the engine tokenizer's and the outlier prober's `fetch`
 * too): only the one a leg announced, to that leg's origin, is looked at.
 */
function onSendHeaders(message: unknown): void {
  const listener = writing;
  if (listener === undefined) return;
  const { request, socket } = message as SendHeadersMessage;
  if (socket === undefined || request?.origin !== writingOrigin) return;
  writing = undefined;
  const since = idleSince.get(socket);
  listener.socketAssigned({
    socket,
    reused: since !== undefined,
    bytesReadAtStart: socket.bytesRead,
    idleMs: since === undefined ? 0 : performance.now() - since,
  });
}

/** The request written on `socket` settled: the socket is idle from now until its next request. */
export function socketFreed(socket: Socket): void {
  idleSince.set(socket, performance.now());
}

/**
 * Called from a handler's `onRequestStart` with its request's origin (`URL.origin` form, as undici's request
 * carries it): undici writes that request's head next, in the same synchronous call, and the listener is told the
 * socket. (A request aborted in between publishes nothing; the next handler's call replaces the stale one, and a
 * request to another origin is never taken for it.)
 */
export function expectSocket(listener: SocketUseListener, origin: string): void {
  if (!subscribed) {
    subscribed = true;
    subscribe('undici:client:sendHeaders', onSendHeaders);
  }
  writing = listener;
  writingOrigin = origin;
}

/** ECONNRESET, EPIPE or undici's "other side closed": how a request written on a socket the server closed fails. */
export function isClosedSocketError(error: Error): boolean {
  const code = (error as { code?: unknown }).code;
  if (code === 'ECONNRESET' || code === 'EPIPE') return true;
  return code === 'UND_ERR_SOCKET' && /other side closed/.test(error.message);
}
