import type { Stage } from '@triad/bus';
import { ErrorCode, TriadError, type ErrorCodeValue } from '@triad/errors';

/** Response headers an error answers with besides its body (`WWW-Authenticate`, custom ones from a hook). */
export type ErrorHeaders = Readonly<Record<string, string>>;

const NO_HEADERS: ErrorHeaders = Object.freeze({});

/**
 * A failure of one client request. Each kind below carries its facts in typed fields; `toOpenAiError` (the one
 * mapping to HTTP) reads them. `headers` are extra response headers (framing headers are never taken).
 */
export class RequestError extends TriadError {
  readonly headers: ErrorHeaders;

  constructor(code: ErrorCodeValue, message: string, options?: { cause?: unknown; headers?: ErrorHeaders }) {
    super(code, message, options);
    this.headers = options?.headers ?? NO_HEADERS;
  }

  /**
   * The message the client gets. `message` is for logs and spans and may say where inside the cluster something
   * failed; what a client reads never names an endpoint or an address (see {@link UpstreamError}).
   */
  get clientMessage(): string {
    return this.message;
  }
}

/** 400: the request is malformed; `param` names the body field to blame, when one is. */
export class BadRequestError extends RequestError {
  readonly param: string | null;

  constructor(message: string, param: string | null = null) {
    super(ErrorCode.GatewayBadRequest, message);
    this.param = param;
  }
}

/** 413: the body is larger than the gateway accepts. */
export class BodyTooLargeError extends RequestError {
  constructor(message: string) {
    super(ErrorCode.GatewayBodyTooLarge, message);
  }
}

/**
 * An error of the HTTP layer itself, before a request reaches the pipeline: headers too large (431), the request
 * not sent in time (408), an unsupported `Expect` (417), the gateway draining (503), a client address over its
 * connection cap (429). Malformed requests are BadRequestErrors.
 */
export class HttpLayerError extends RequestError {
  constructor(
    code:
      | typeof ErrorCode.GatewayHeadersTooLarge
      | typeof ErrorCode.GatewayRequestTimeout
      | typeof ErrorCode.GatewayExpectationFailed
      | typeof ErrorCode.GatewayDraining
      | typeof ErrorCode.GatewayTooManyConnections,
    message: string,
  ) {
    super(code, message);
  }
}

/**
 * A client-supplied value as error messages and logs may repeat it: the first `max` characters, and how long it
 * really was. Without it a 5 MiB `model` would come back in the 404 body and fill the access log.
 */
export function echo(value: string, max = 128): string {
  return value.length <= max ? value : `${value.slice(0, max)}… (${value.length} characters)`;
}

/** 404: no ModelRoute or ModelServer serves the model (`param: 'model'`). */
export class NotFoundError extends RequestError {
  readonly param: string | null;

  constructor(message: string, param: string | null = null) {
    super(ErrorCode.GatewayModelNotFound, message);
    this.param = param;
  }
}

/**
 * 404 `GATEWAY_PATH_NOT_FOUND`: the gateway has no route for the request, whatever its model: an unknown method and
 * path, no HTTPRoute for a path off `/v1/`, no Gateway listener for its port and Host.
 */
export class PathNotFoundError extends RequestError {
  readonly method: string;
  readonly path: string;

  constructor(method: string, path: string, message: string) {
    super(ErrorCode.GatewayPathNotFound, message);
    this.method = method;
    this.path = path;
  }
}

/** 401 with a `WWW-Authenticate: Bearer` challenge (`error="invalid_token"` when a credential was refused). */
export class UnauthorizedError extends RequestError {
  readonly reason: 'missing_credentials' | 'invalid_credentials';

  constructor(message: string, reason: 'missing_credentials' | 'invalid_credentials', options?: { headers?: ErrorHeaders }) {
    const challenge = `Bearer realm="triad"${reason === 'invalid_credentials' ? ', error="invalid_token"' : ''}`;
    super(ErrorCode.GatewayUnauthorized, message, { headers: options?.headers ?? { 'www-authenticate': challenge } });
    this.reason = reason;
  }
}

/** 403: the credentials may not use the model. */
export class ForbiddenError extends RequestError {
  readonly reason = 'model_forbidden' as const;

  constructor(message: string) {
    super(ErrorCode.GatewayForbidden, message);
  }
}

/** Why a request was refused with 429. */
export type RateLimitReason = 'input_rate_limited' | 'output_rate_limited' | 'request_too_large' | 'queue_full';

/** 429 with `Retry-After` (`retryAfter` seconds, rounded up; 1 when unknown). */
export class RateLimitedError extends RequestError {
  readonly reason: RateLimitReason;
  /** Seconds until a retry can succeed, when known. */
  readonly retryAfter: number | undefined;

  constructor(message: string, reason: RateLimitReason, retryAfter?: number) {
    super(ErrorCode.GatewayRateLimited, message);
    this.reason = reason;
    this.retryAfter = retryAfter;
  }

  /** Which token budget ran out (the `limit_type` label), undefined for queue and size refusals. */
  get limitType(): 'input' | 'output' | undefined {
    return this.reason === 'input_rate_limited' ? 'input' : this.reason === 'output_rate_limited' ? 'output' : undefined;
  }
}

/** 504: the request waited in the fairness queue longer than allowed. */
export class QueueTimeoutError extends RequestError {
  readonly reason = 'queue_timeout' as const;

  constructor(message: string) {
    super(ErrorCode.GatewayQueueTimeout, message);
  }
}

/** 503 with `Retry-After`: rate limits cannot be checked (budget store unreachable, failing closed). */
export class AdmissionUnavailableError extends RequestError {
  readonly reason = 'store_unavailable' as const;
  readonly retryAfter: number;

  constructor(message: string, retryAfter: number) {
    super(ErrorCode.AdmissionUnavailable, message);
    this.retryAfter = retryAfter;
  }
}

/** 499: the client went away (before admission, or mid-request: every leg is aborted with this). */
export class ClientAbortedError extends RequestError {
  readonly reason = 'client_aborted' as const;

  constructor(message = 'client closed the connection') {
    super(ErrorCode.ClientAborted, message);
  }
}

/** Where an engine leg failed. */
export interface LegFailure {
  readonly stage: Stage;
  /** Endpoint key (`ns.server.pod`). */
  readonly endpoint: string;
  /** Media item index of an encode leg, else -1. */
  readonly item: number;
  /** The engine's HTTP status, 0 when none arrived. */
  readonly status: number;
}

/** IPv4 addresses and bracketed IPv6 ones, with their ports: engine and socket messages may quote a pod's address. */
const ADDRESS = /\b\d{1,3}(?:\.\d{1,3}){3}(?::\d{1,5})?\b|\[[0-9A-Fa-f:.]+\](?::\d{1,5})?/g;

/** What a failed connection says to a client, by the socket's error code (its own text names the address). */
const TRANSPORT_FAILURES: Readonly<Record<string, string>> = {
  ECONNREFUSED: 'the connection was refused',
  ECONNRESET: 'the connection was reset',
  EPIPE: 'the connection was closed while sending',
  ETIMEDOUT: 'the connection timed out',
  EHOSTUNREACH: 'the host is unreachable',
  ENOTFOUND: 'the host name does not resolve',
  UND_ERR_CONNECT_TIMEOUT: 'connecting timed out',
  UND_ERR_SOCKET: 'the connection was closed by the other side',
};

/** The upstream message a client may read: the endpoint left out, a transport error by its code, addresses masked. */
function upstreamClientMessage(message: string, endpoint: string, cause: unknown): string {
  let text = message;
  // By shape, not class: socket errors come from Node's own realm.
  const failure = typeof cause === 'object' && cause !== null ? (cause as { code?: unknown; message?: unknown }) : undefined;
  const code = typeof failure?.code === 'string' ? failure.code : undefined;
  const said = typeof failure?.message === 'string' ? failure.message : '';
  if (code !== undefined && said !== '' && text.endsWith(said)) {
    text = `${text.slice(0, text.length - said.length)}${TRANSPORT_FAILURES[code] ?? `the connection failed (${code})`}`;
  }
  // Leg messages say where as `<stage> on <endpoint>`; any other mention of the endpoint is named generically.
  if (endpoint !== '') text = text.split(` on ${endpoint}`).join('').split(endpoint).join('the endpoint');
  return text.replace(ADDRESS, '<address>');
}

/**
 * An engine leg failed: `GATEWAY_UPSTREAM_ERROR` (non-2xx answer or broken transfer, 502 — an engine 4xx keeps
 * its status), `GATEWAY_UPSTREAM_CONNECT` (502) or `GATEWAY_UPSTREAM_TIMEOUT` (a stage budget, 504).
 * `retryable` says whether the next alternate may be tried (only before the first byte reached the client).
 * `message` names the endpoint (`prefill on ns.server.pod failed …`) for logs and spans; the client's message
 * leaves it out, says a transport failure by its code and masks network addresses.
 */
export class UpstreamError extends RequestError implements LegFailure {
  readonly stage: Stage;
  readonly endpoint: string;
  readonly item: number;
  readonly status: number;
  readonly retryable: boolean;

  constructor(
    code:
      | typeof ErrorCode.UpstreamError
      | typeof ErrorCode.UpstreamConnect
      | typeof ErrorCode.UpstreamTimeout
      | typeof ErrorCode.GatewayPathNotFound,
    message: string,
    where: LegFailure,
    retryable: boolean,
    cause?: unknown,
  ) {
    super(code, message, cause === undefined ? undefined : { cause });
    this.stage = where.stage;
    this.endpoint = where.endpoint;
    this.item = where.item;
    this.status = where.status;
    this.retryable = retryable;
  }

  override get clientMessage(): string {
    return upstreamClientMessage(this.message, this.endpoint, this.cause);
  }
}

/**
 * 404 `GATEWAY_PATH_NOT_FOUND`: the engine has no route for the path it was sent (FastAPI's own `{"detail":"Not
 * Found"}`), so no engine of that ModelServer serves it. Never retried, and no judgement on the engine (outlier
 * detection skips engine 4xx). The client's message names the request's method, path and model.
 */
export class PathNotServedError extends UpstreamError {
  constructor(message: string, where: LegFailure) {
    super(ErrorCode.GatewayPathNotFound, message, where, false);
  }
}

/**
 * Why an encoder-cache hand-off failed (the `reason` label of `triad_gateway_ec_handoff_failures_total`):
 * an encoder answer that is not JSON or holds malformed `ec_transfer_params`; an answer whose entries do not match
 * the items sent; a push EC connector whose consumer published no control address; a consumer that failed (HTTP
 * 500 before any byte) because the pushed items never arrived (`push_timeout`), or, with a shared-storage or pull
 * connector, because it could not read the encoder output (`output_lost`).
 */
export type EcHandoffFailureReason =
  'invalid_encoder_answer' | 'item_mismatch' | 'missing_consumer_address' | 'push_timeout' | 'output_lost';

/**
 * 502: an encoder-cache hand-off between an encode leg and its consumer failed (vLLM EPD). `stage`, `item` and
 * `endpoint` say where; `reason` is the metric label.
 */
export class EcHandoffError extends UpstreamError {
  readonly reason: EcHandoffFailureReason;

  constructor(reason: EcHandoffFailureReason, message: string, where: LegFailure, retryable: boolean, cause?: unknown) {
    super(ErrorCode.UpstreamError, message, where, retryable, cause);
    this.reason = reason;
  }
}

/** 504: the whole request ran out of its total time budget (never retried). */
export class TotalTimeoutError extends RequestError {
  readonly budgetMs: number;

  constructor(budgetMs: number) {
    super(ErrorCode.UpstreamTimeout, `request exceeded the total timeout of ${budgetMs} ms`);
    this.budgetMs = budgetMs;
  }
}

/**
 * No placement for the request: the scheduler's failed decision (its `SCHED_*` / `BUS_*` code), or a decision a
 * connector cannot run (no prefill for SGLang PD, no encoder for a media item: then `stage` and `item` say where).
 */
export class SchedulingError extends RequestError {
  readonly stage: Stage | undefined;
  /** Media item the failure concerns, else -1. */
  readonly item: number;

  constructor(code: ErrorCodeValue, message: string, where?: { stage: Stage; item: number }) {
    super(code, message);
    this.stage = where?.stage;
    this.item = where?.item ?? -1;
  }
}

/** Whether the stage loop may try the next alternate after `err` (only before any byte reached the client). */
export function isRetryable(err: unknown): err is UpstreamError {
  return err instanceof UpstreamError && err.retryable;
}

/** The stage a failure belongs to (`triad.failed_stage`, the retry metric's `stage`), when it names one. */
export function failedStageOf(err: unknown): Stage | undefined {
  if (err instanceof UpstreamError) return err.stage;
  if (err instanceof SchedulingError) return err.stage;
  return undefined;
}

/** The error's code for labels and logs: the TriadError code, or a Node error's own `code`, else undefined. */
export function errorCodeOf(err: Error): string | undefined {
  return 'code' in err && typeof err.code === 'string' ? err.code : undefined;
}

/** What was thrown, as an Error (anything else is wrapped, so results and hooks always get an Error). */
export function asError(err: unknown): Error {
  return err instanceof Error ? err : new Error(String(err));
}
