/**
 * The transport's errors carry the `code`s undici gives the same failures, because the retry, resend and
 * client-message rules read codes (errors.ts, socket-reuse.ts, @triad/request's transport messages): a leg fails
 * alike on either transport. Socket errors from node (ECONNREFUSED, ECONNRESET, EPIPE, …) are passed on as they are.
 */
export class H1Error extends Error {
  readonly code: string;

  constructor(code: string, message: string) {
    super(message);
    this.name = 'H1Error';
    this.code = code;
  }
}

/** The server closed the connection before the answer was complete (undici's SocketError). */
export function otherSideClosedError(): H1Error {
  return new H1Error('UND_ERR_SOCKET', 'other side closed');
}

export function connectTimeoutError(address: string, timeoutMs: number): H1Error {
  return new H1Error('UND_ERR_CONNECT_TIMEOUT', `Connect Timeout Error (attempted address: ${address}, timeout: ${timeoutMs}ms)`);
}

/** A request the transport refuses to write (an invalid header name or value, method or path). */
export function invalidArgumentError(message: string): H1Error {
  return new H1Error('UND_ERR_INVALID_ARG', message);
}

export function requestAbortedError(): H1Error {
  return new H1Error('UND_ERR_ABORTED', 'Request aborted');
}

export function poolDestroyedError(): H1Error {
  return new H1Error('UND_ERR_DESTROYED', 'The client is destroyed');
}

/** An answer that is not HTTP/1.1 (llhttp's `HPE_*` codes, as undici reports its parser's errors). */
export function malformedAnswerError(code: string, what: string): H1Error {
  return new H1Error(code, `Response does not match the HTTP/1.1 protocol (${what})`);
}
