import { ErrorCode, TriadError, type ErrorCodeValue } from '@triad/errors';

/** The OpenAI error body every Triad HTTP error uses (docs/CONTRACTS.md "Errors on the wire"). */
export interface OpenAiErrorBody {
  readonly error: { readonly message: string; readonly type: string; readonly param: string | null; readonly code: string };
}

/** Why a request was not admitted; also the `reason` label of the decision metric. */
export type RejectionReason =
  | 'missing_credentials'
  | 'invalid_credentials'
  | 'model_forbidden'
  | 'input_rate_limited'
  | 'output_rate_limited'
  | 'request_too_large'
  | 'queue_full'
  | 'queue_timeout'
  | 'client_aborted'
  | 'store_unavailable';

/** A refusal, ready to send: status, headers (`Retry-After`, `WWW-Authenticate`) and the OpenAI-shaped body. */
export interface AdmissionRejection {
  readonly status: 401 | 403 | 429 | 499 | 503 | 504;
  readonly code: ErrorCodeValue;
  readonly reason: RejectionReason;
  readonly message: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: OpenAiErrorBody;
  /** Whole seconds until a retry can succeed (429/503); also in `headers['retry-after']`. */
  readonly retryAfterSec?: number;
  /** The same refusal as a TriadError (details: status, reason, headers, retryAfterSeconds, limitType) for one-place error mapping. */
  toError(): TriadError;
}

const TYPE_BY_STATUS: Readonly<Record<AdmissionRejection['status'], string>> = {
  401: 'authentication_error',
  403: 'permission_error',
  429: 'rate_limit_error',
  499: 'client_closed_request',
  503: 'service_unavailable_error',
  504: 'timeout_error',
};

/** Builds `{"error":{"message","type","param","code"}}`. */
export function openAiErrorBody(message: string, type: string, code: string, param: string | null = null): OpenAiErrorBody {
  return { error: { message, type, param, code } };
}

function reject(status: AdmissionRejection['status'], code: ErrorCodeValue, reason: RejectionReason, message: string, retryAfterSec?: number): AdmissionRejection {
  const headers: Record<string, string> = {};
  if (retryAfterSec !== undefined) headers['retry-after'] = String(retryAfterSec);
  if (status === 401) headers['www-authenticate'] = `Bearer realm="triad"${reason === 'invalid_credentials' ? ', error="invalid_token"' : ''}`;
  const body = openAiErrorBody(message, TYPE_BY_STATUS[status], code);
  return {
    status, code, reason, message, headers, body,
    ...(retryAfterSec !== undefined ? { retryAfterSec } : {}),
    // `retryAfterSeconds` and `limitType` are the detail keys the gateway's error mapping and metrics read.
    toError: () => new TriadError(code, message, {
      details: {
        status, reason, headers,
        ...(retryAfterSec !== undefined ? { retryAfterSeconds: retryAfterSec } : {}),
        ...(reason === 'input_rate_limited' ? { limitType: 'input' } : reason === 'output_rate_limited' ? { limitType: 'output' } : {}),
      },
    }),
  };
}

/** Whole seconds (at least 1) until `atMs`, as `Retry-After` wants them. */
export function retryAfterSeconds(nowMs: number, atMs: number): number {
  return Math.max(1, Math.ceil((atMs - nowMs) / 1000));
}

export const Rejections = {
  missingCredentials: (): AdmissionRejection =>
    reject(401, ErrorCode.GatewayUnauthorized, 'missing_credentials', 'Missing credentials: send "Authorization: Bearer <api key or JWT>".'),
  /** The message says what kind of check failed, never echoes the credential. */
  invalidCredentials: (why: string): AdmissionRejection =>
    reject(401, ErrorCode.GatewayUnauthorized, 'invalid_credentials', `Invalid credentials: ${why}.`),
  modelForbidden: (model: string): AdmissionRejection =>
    reject(403, ErrorCode.GatewayForbidden, 'model_forbidden', `The credentials used may not access model '${model}'.`),
  rateLimited: (kind: 'input' | 'output', scope: string, retryAfterSec: number): AdmissionRejection =>
    reject(429, ErrorCode.GatewayRateLimited, kind === 'input' ? 'input_rate_limited' : 'output_rate_limited',
      `${kind === 'input' ? 'Input' : 'Output'} token rate limit exceeded for ${scope}; retry after ${retryAfterSec}s.`, retryAfterSec),
  requestTooLarge: (scope: string, tokens: number, limit: number): AdmissionRejection =>
    reject(429, ErrorCode.GatewayRateLimited, 'request_too_large',
      `The request needs about ${tokens} input tokens, more than the whole limit of ${limit} per unit for ${scope}.`),
  queueFull: (model: string): AdmissionRejection =>
    reject(429, ErrorCode.GatewayRateLimited, 'queue_full', `Too many requests are waiting for model '${model}'.`, 1),
  queueTimeout: (model: string): AdmissionRejection =>
    reject(504, ErrorCode.GatewayQueueTimeout, 'queue_timeout', `Request processing timed out in queue for model '${model}'.`),
  clientAborted: (): AdmissionRejection =>
    reject(499, ErrorCode.ClientAborted, 'client_aborted', 'The client closed the request before it was admitted.'),
  storeUnavailable: (retryAfterSec = 1): AdmissionRejection =>
    reject(503, ErrorCode.AdmissionUnavailable, 'store_unavailable', 'Rate limits cannot be checked right now; retry shortly.', retryAfterSec),
} as const;
