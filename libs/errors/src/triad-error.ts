/**
 * Every error code Triad raises, one place for all components. Codes are prefixed by component and stay stable:
 * they appear in logs, metrics labels, NATS error replies and the `code` of OpenAI-shaped error bodies.
 */
export const ErrorCode = {
  CrdInvalid: 'CRD_INVALID',
  ConfigInvalid: 'CONFIG_INVALID',
  BusMessageInvalid: 'BUS_MESSAGE_INVALID',
  BusUnavailable: 'BUS_UNAVAILABLE',
  SchedNoCandidates: 'SCHED_NO_CANDIDATES',
  SchedFilteredOut: 'SCHED_FILTERED_OUT',
  SchedNoPrefillPair: 'SCHED_NO_PREFILL_PAIR',
  SchedNoEncoder: 'SCHED_NO_ENCODER',
  SchedUnknownModelServer: 'SCHED_UNKNOWN_MODEL_SERVER',
  SchedBadRequest: 'SCHED_BAD_REQUEST',
  SchedTimeout: 'SCHED_TIMEOUT',
  GatewayBadRequest: 'GATEWAY_BAD_REQUEST',
  GatewayModelNotFound: 'GATEWAY_MODEL_NOT_FOUND',
  GatewayBodyTooLarge: 'GATEWAY_BODY_TOO_LARGE',
  GatewayRateLimited: 'GATEWAY_RATE_LIMITED',
  GatewayUnauthorized: 'GATEWAY_UNAUTHORIZED',
  GatewayForbidden: 'GATEWAY_FORBIDDEN',
  GatewayNoEndpoint: 'GATEWAY_NO_ENDPOINT',
  GatewayQueueTimeout: 'GATEWAY_QUEUE_TIMEOUT',
  UpstreamError: 'GATEWAY_UPSTREAM_ERROR',
  UpstreamTimeout: 'GATEWAY_UPSTREAM_TIMEOUT',
  UpstreamConnect: 'GATEWAY_UPSTREAM_CONNECT',
  ClientAborted: 'GATEWAY_CLIENT_ABORTED',
  /** The admission budget store (NATS KV or Redis) is unreachable and rate limits fail closed. */
  AdmissionUnavailable: 'GATEWAY_ADMISSION_UNAVAILABLE',
  Internal: 'INTERNAL',
} as const;
export type ErrorCodeValue = (typeof ErrorCode)[keyof typeof ErrorCode];

/** Base class of Triad's errors: a stable `code`, a human message, and the cause kept for logs. */
export class TriadError extends Error {
  readonly code: ErrorCodeValue;
  /** Extra structured facts for logs and error bodies (stage, endpoint, field path, ...). */
  readonly details: Readonly<Record<string, unknown>>;

  constructor(code: ErrorCodeValue, message: string, options?: { cause?: unknown; details?: Record<string, unknown> }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'TriadError';
    this.code = code;
    this.details = options?.details ?? {};
  }
}

/** True for any TriadError, including ones from another copy of this module (checks the shape, not the class). */
export function isTriadError(err: unknown): err is TriadError {
  return err instanceof TriadError || (err instanceof Error && typeof (err as { code?: unknown }).code === 'string' && Object.values(ErrorCode).includes((err as TriadError).code));
}
