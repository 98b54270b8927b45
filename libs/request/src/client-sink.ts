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

/**
 * The answer header naming the request's trace (`RequestContext.traceId`), so a user can look the request up: the
 * first header of the answer's head, success or error.
 */
export const TRACE_ID_HEADER = 'x-triad-trace-id';
