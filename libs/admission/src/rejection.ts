import {
  AdmissionUnavailableError,
  ClientAbortedError,
  ForbiddenError,
  QueueTimeoutError,
  RateLimitedError,
  UnauthorizedError,
} from '@triad/request';

/**
 * A refusal: one of the request errors of @triad/request, each with its `reason` (the decision metric's label).
 * The gateway answers it through the one OpenAI error mapping (`toOpenAiError`).
 */
export type AdmissionRejection =
  UnauthorizedError | ForbiddenError | RateLimitedError | QueueTimeoutError | ClientAbortedError | AdmissionUnavailableError;

/** Whole seconds (at least 1) until `atMs`, as `Retry-After` wants them. */
export function retryAfterSeconds(nowMs: number, atMs: number): number {
  return Math.max(1, Math.ceil((atMs - nowMs) / 1000));
}

export const Rejections = {
  missingCredentials: (): AdmissionRejection =>
    new UnauthorizedError('Missing credentials: send "Authorization: Bearer <api key or JWT>".', 'missing_credentials'),
  /** The message says what kind of check failed, never echoes the credential. */
  invalidCredentials: (why: string): AdmissionRejection => new UnauthorizedError(`Invalid credentials: ${why}.`, 'invalid_credentials'),
  modelForbidden: (model: string): AdmissionRejection => new ForbiddenError(`The credentials used may not access model '${model}'.`),
  rateLimited: (kind: 'input' | 'output', scope: string, retryAfterSec: number): AdmissionRejection =>
    new RateLimitedError(
      `${kind === 'input' ? 'Input' : 'Output'} token rate limit exceeded for ${scope}; retry after ${retryAfterSec}s.`,
      kind === 'input' ? 'input_rate_limited' : 'output_rate_limited',
      retryAfterSec,
    ),
  requestTooLarge: (scope: string, tokens: number, limit: number): AdmissionRejection =>
    new RateLimitedError(
      `The request needs about ${tokens} input tokens, more than the whole limit of ${limit} per unit for ${scope}.`,
      'request_too_large',
    ),
  queueFull: (model: string): AdmissionRejection =>
    new RateLimitedError(`Too many requests are waiting for model '${model}'.`, 'queue_full', 1),
  queueTimeout: (model: string): AdmissionRejection => new QueueTimeoutError(`Request processing timed out in queue for model '${model}'.`),
  clientAborted: (): AdmissionRejection => new ClientAbortedError('The client closed the request before it was admitted.'),
  storeUnavailable: (retryAfterSec = 1): AdmissionRejection =>
    new AdmissionUnavailableError('Rate limits cannot be checked right now; retry shortly.', retryAfterSec),
} as const;
