/**
 * Every error code Triad raises, one place for all components. Codes are prefixed by component and stay stable:
 * they appear in logs, metrics labels, NATS error replies and the `code` of OpenAI-shaped error bodies.
 */
export const ErrorCode = {
  ConfigInvalid: 'CONFIG_INVALID',
  BusMessageInvalid: 'BUS_MESSAGE_INVALID',
  BusUnavailable: 'BUS_UNAVAILABLE',
  SchedNoCandidates: 'SCHED_NO_CANDIDATES',
  SchedFilteredOut: 'SCHED_FILTERED_OUT',
  SchedNoPrefillPair: 'SCHED_NO_PREFILL_PAIR',
  SchedNoEncoder: 'SCHED_NO_ENCODER',
  SchedUnknownModelServer: 'SCHED_UNKNOWN_MODEL_SERVER',
  SchedBadRequest: 'SCHED_BAD_REQUEST',
  GatewayBadRequest: 'GATEWAY_BAD_REQUEST',
  GatewayModelNotFound: 'GATEWAY_MODEL_NOT_FOUND',
  /** No such path: the gateway serves no route for it, or the engines of the model it was routed to do not. */
  GatewayPathNotFound: 'GATEWAY_PATH_NOT_FOUND',
  GatewayBodyTooLarge: 'GATEWAY_BODY_TOO_LARGE',
  GatewayRateLimited: 'GATEWAY_RATE_LIMITED',
  GatewayUnauthorized: 'GATEWAY_UNAUTHORIZED',
  GatewayForbidden: 'GATEWAY_FORBIDDEN',
  GatewayQueueTimeout: 'GATEWAY_QUEUE_TIMEOUT',
  /** The HTTP layer refused the request head: headers over the server's limit (431). */
  GatewayHeadersTooLarge: 'GATEWAY_HEADERS_TOO_LARGE',
  /** The client did not send its request (head or body) within the server's request timeout (408). */
  GatewayRequestTimeout: 'GATEWAY_REQUEST_TIMEOUT',
  /** An `Expect` header other than `100-continue` (417). */
  GatewayExpectationFailed: 'GATEWAY_EXPECTATION_FAILED',
  /** The gateway is shutting down and takes no new requests (503; the client should go to another replica). */
  GatewayDraining: 'GATEWAY_DRAINING',
  /** The client's address holds as many open connections as the gateway allows one address (429, then closed). */
  GatewayTooManyConnections: 'GATEWAY_TOO_MANY_CONNECTIONS',
  UpstreamError: 'GATEWAY_UPSTREAM_ERROR',
  UpstreamTimeout: 'GATEWAY_UPSTREAM_TIMEOUT',
  UpstreamConnect: 'GATEWAY_UPSTREAM_CONNECT',
  ClientAborted: 'GATEWAY_CLIENT_ABORTED',
  /** An ExternalModelProvider a route targets exists but cannot be called (not Ready, credential unavailable). */
  ProviderUnavailable: 'GATEWAY_PROVIDER_UNAVAILABLE',
  /** The credential a ModelServer names for its engines (`engineAuth.credential`) cannot be read by the gateway. */
  EngineCredentialUnavailable: 'GATEWAY_ENGINE_CREDENTIAL_UNAVAILABLE',
  /** The admission budget store (NATS KV or Redis) is unreachable and rate limits fail closed. */
  AdmissionUnavailable: 'GATEWAY_ADMISSION_UNAVAILABLE',
  Internal: 'INTERNAL',
} as const;
export type ErrorCodeValue = (typeof ErrorCode)[keyof typeof ErrorCode];

const CODES: ReadonlySet<string> = new Set(Object.values(ErrorCode));

/** Whether a code read off the wire (a decision, a NATS error reply) is one Triad knows. */
export function isErrorCode(code: string): code is ErrorCodeValue {
  return CODES.has(code);
}

/**
 * Base class of Triad's errors: a stable `code`, a human message, and the cause kept for logs. Facts beyond the
 * code live in typed fields of subclasses (the request path's kinds are in @triad/request), never in a bag.
 */
export class TriadError extends Error {
  readonly code: ErrorCodeValue;

  constructor(code: ErrorCodeValue, message: string, options?: { cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
  }
}

/** A configuration document or setting was refused; `problems` lists every reason (field path and why). */
export class ConfigError extends TriadError {
  readonly problems: readonly string[];

  constructor(message: string, problems: readonly string[], options?: { cause?: unknown }) {
    super(ErrorCode.ConfigInvalid, message, options);
    this.problems = problems;
  }
}

/** True for any TriadError, including ones from another copy of this module (checks the shape, not the class). */
export function isTriadError(err: unknown): err is TriadError {
  if (err instanceof TriadError) return true;
  return err instanceof Error && 'code' in err && typeof err.code === 'string' && CODES.has(err.code);
}
