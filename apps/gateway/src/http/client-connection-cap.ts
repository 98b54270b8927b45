import type { Server } from 'node:http';
import type { Socket } from 'node:net';

/**
 * At most `maxPerClient` open connections per client address, across every server it is attached to (the API port
 * and, in Gateway API mode, each listener port). A client is its socket's remote address and nothing else: no
 * header (`X-Forwarded-For`) is trusted, so behind a proxy that does not keep client addresses every client shares
 * the proxy's address and the cap bounds the proxy's connections.
 *
 * A connection over the cap is counted nowhere: it is answered at once with `answer` (a complete HTTP response that
 * closes the connection, written before its request is read) and ended; requests it still sends are not served
 * ({@link isRefusedConnection}). It may stay open `lingerMs` idle for the client to read the answer and close it,
 * then it is destroyed; node's header and request timeouts bound one that keeps sending.
 */
export interface ClientConnectionCapOptions {
  /** Open connections one client address may hold; 0: no cap (nothing is counted). */
  readonly maxPerClient: number;
  /** The bytes written to a refused connection: a complete HTTP response with `Connection: close`. */
  readonly answer: string;
  /** How long a refused connection may stay idle before it is destroyed. */
  readonly lingerMs: number;
  /**
   * A connection was refused; `first`: the first refusal since the address last held no connection (log that one:
   * a client held at the cap is one log line, however often it retries).
   */
  readonly onRefused: (address: string, first: boolean) => void;
}

/** Set on a socket the cap refused. */
const REFUSED = Symbol('triad.connectionRefused');

type CappedSocket = Socket & { [REFUSED]?: true };

/** The cap answered this connection already: requests arriving on it are dropped, not served. */
export function isRefusedConnection(socket: Socket): boolean {
  return (socket as CappedSocket)[REFUSED] === true;
}

export class ClientConnectionCap {
  readonly #options: ClientConnectionCapOptions;
  /** Open connections by client address; an address leaves the map with its last connection. */
  readonly #open = new Map<string, number>();
  /** Addresses refused since they last held no connection. */
  readonly #refusing = new Set<string>();

  constructor(options: ClientConnectionCapOptions) {
    this.#options = options;
  }

  /** Counts the server's connections (after node's own listener, so its parser is already attached). */
  attach(server: Server): void {
    if (this.#options.maxPerClient === 0) return;
    server.on('connection', (socket: Socket) => this.#admit(socket));
  }

  /** Open connections counted for `address`. */
  openFrom(address: string): number {
    return this.#open.get(address) ?? 0;
  }

  #admit(socket: Socket): void {
    const address = socket.remoteAddress;
    // A socket reset before it was handed over has no address any more, and is closing anyway.
    if (address === undefined) return;
    const open = this.#open.get(address) ?? 0;
    if (open >= this.#options.maxPerClient) {
      this.#refuse(socket, address);
      return;
    }
    this.#open.set(address, open + 1);
    socket.once('close', () => this.#release(address));
  }

  #release(address: string): void {
    const open = (this.#open.get(address) ?? 1) - 1;
    if (open > 0) {
      this.#open.set(address, open);
      return;
    }
    this.#open.delete(address);
    this.#refusing.delete(address);
  }

  #refuse(socket: CappedSocket, address: string): void {
    socket[REFUSED] = true;
    const first = !this.#refusing.has(address);
    if (first) this.#refusing.add(address);
    this.#options.onRefused(address, first);
    // Read on (the parser discards what arrives) rather than close with unread bytes: a close then sends a reset,
    // which can reach the client before it read the answer.
    socket.setTimeout(this.#options.lingerMs, () => socket.destroy());
    socket.end(this.#options.answer);
  }
}
