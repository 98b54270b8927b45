import { subscribe } from 'node:diagnostics_channel';
import type { Socket } from 'node:net';

/**
 * Which socket a request was written on, and whether that socket had carried a request before.
 *
 * A kept-alive socket can be closed by the engine (its idle timeout) just as the gateway writes the next request on
 * it: the request then fails with ECONNRESET, EPIPE or "other side closed" though the engine never saw it. Go's
 * HTTP transport retries exactly that case (a reused connection, nothing read back); so does the leg
 * (`Leg.onResponseError`), which needs to know the socket. undici does not tell a dispatch handler its socket, but
 * publishes `undici:client:sendHeaders` (with the socket) synchronously right after calling the handler's
 * `onRequestStart`, in the same call: the leg announces itself there, and the next publication is its own.
 */
export interface SocketUse {
  readonly socket: Socket;
  /** The socket carried an earlier request (a kept-alive connection taken from the pool). */
  readonly reused: boolean;
  /** The socket's bytes read when this request was written: unchanged at a failure means nothing came back. */
  readonly bytesReadAtStart: number;
}

/** Told which socket its request is being written on. */
export interface SocketUseListener {
  socketAssigned(use: SocketUse): void;
}

/** Requests written on each socket so far. */
const written = new WeakMap<Socket, number>();
/** The handler whose request undici is writing right now (set in its `onRequestStart`). */
let writing: SocketUseListener | undefined;
let subscribed = false;

function onSendHeaders(message: unknown): void {
  const socket = (message as { socket?: Socket }).socket;
  if (socket === undefined) return;
  const count = (written.get(socket) ?? 0) + 1;
  written.set(socket, count);
  const listener = writing;
  writing = undefined;
  listener?.socketAssigned({ socket, reused: count > 1, bytesReadAtStart: socket.bytesRead });
}

/**
 * Called from a handler's `onRequestStart`: undici writes that request's head next, in the same synchronous call,
 * and the listener is told the socket. (A request aborted in between publishes nothing; the next handler's call
 * replaces the stale one.)
 */
export function expectSocket(listener: SocketUseListener): void {
  if (!subscribed) {
    subscribed = true;
    subscribe('undici:client:sendHeaders', onSendHeaders);
  }
  writing = listener;
}

/** ECONNRESET, EPIPE or undici's "other side closed": how a request written on a socket the server closed fails. */
export function isClosedSocketError(error: Error): boolean {
  const code = (error as { code?: unknown }).code;
  if (code === 'ECONNRESET' || code === 'EPIPE') return true;
  return code === 'UND_ERR_SOCKET' && /other side closed/.test(error.message);
}
