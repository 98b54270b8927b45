/**
 * The client side of one request: a structural subset of node's `ServerResponse`, so the gateway passes
 * `reply.raw` and the connectors write bytes straight to the socket.
 */
export interface ClientSink {
  writeHead(status: number, headers: Record<string, string | number>): unknown;
  write(chunk: Buffer | string): boolean;
  end(chunk?: Buffer | string): unknown;
  once(event: 'drain', listener: () => void): unknown;
  readonly destroyed: boolean;
  readonly headersSent: boolean;
  /** `end()` was called: nothing more may be written. */
  readonly writableEnded: boolean;
}
