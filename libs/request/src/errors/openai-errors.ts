import { ErrorCode, isTriadError, type ErrorCodeValue, type TriadError } from '@triad/errors';
import { TRACE_ID_HEADER, type ClientSink } from '../client-sink';
import {
  AdmissionUnavailableError,
  BadRequestError,
  NotFoundError,
  PathNotServedError,
  RateLimitedError,
  RequestError,
  UpstreamError,
  echo,
} from './request-errors';

/**
 * HTTP status of every ErrorCode on the OpenAI-compatible surface — the one mapping (TypeScript makes it
 * exhaustive). Engine 4xx answers are refined in {@link httpStatusOf}.
 */
const STATUS: Readonly<Record<ErrorCodeValue, number>> = {
  [ErrorCode.ConfigInvalid]: 500,
  [ErrorCode.BusMessageInvalid]: 503,
  [ErrorCode.BusUnavailable]: 503,
  [ErrorCode.SchedNoCandidates]: 503,
  [ErrorCode.SchedFilteredOut]: 503,
  [ErrorCode.SchedNoPrefillPair]: 503,
  [ErrorCode.SchedNoEncoder]: 503,
  [ErrorCode.SchedUnknownModelServer]: 404,
  [ErrorCode.SchedBadRequest]: 400,
  [ErrorCode.GatewayBadRequest]: 400,
  [ErrorCode.GatewayModelNotFound]: 404,
  [ErrorCode.GatewayPathNotFound]: 404,
  [ErrorCode.GatewayBodyTooLarge]: 413,
  [ErrorCode.GatewayRateLimited]: 429,
  [ErrorCode.GatewayUnauthorized]: 401,
  [ErrorCode.GatewayForbidden]: 403,
  [ErrorCode.GatewayQueueTimeout]: 504,
  [ErrorCode.GatewayHeadersTooLarge]: 431,
  [ErrorCode.GatewayRequestTimeout]: 408,
  [ErrorCode.GatewayExpectationFailed]: 417,
  [ErrorCode.GatewayDraining]: 503,
  [ErrorCode.GatewayTooManyConnections]: 429,
  [ErrorCode.AdmissionUnavailable]: 503,
  [ErrorCode.UpstreamError]: 502,
  [ErrorCode.UpstreamTimeout]: 504,
  [ErrorCode.UpstreamConnect]: 502,
  [ErrorCode.ClientAborted]: 499,
  [ErrorCode.ProviderUnavailable]: 503,
  [ErrorCode.EngineCredentialUnavailable]: 503,
  [ErrorCode.Internal]: 500,
};

/** OpenAI's `error.type` names by status. */
function typeFor(status: number): string {
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status === 404) return 'not_found_error';
  if (status === 429) return 'rate_limit_error';
  if (status === 504) return 'timeout_error';
  return status < 500 ? 'invalid_request_error' : 'server_error';
}

/** An error as the OpenAI-compatible API answers it. */
export interface OpenAiError {
  readonly status: number;
  /** `{"error":{"message","type","param","code"}}` */
  readonly body: string;
  /** Extra response headers (`Retry-After` on 429/503, `WWW-Authenticate` on 401, a hook's own). */
  readonly headers: Readonly<Record<string, string>>;
}

/** Headers the error response frames itself; an error's `headers` never replace them. */
const RESERVED = new Set(['content-type', 'content-length', 'transfer-encoding', 'connection', 'x-request-id']);

const INTERNAL: OpenAiError = Object.freeze({
  status: 500,
  body: JSON.stringify({ error: { message: 'internal error', type: 'server_error', param: null, code: ErrorCode.Internal } }),
  headers: Object.freeze({}),
});

/** The HTTP status an error answers with: by code; an engine's own 4xx keeps its status; unknown errors 500. */
export function httpStatusOf(err: unknown): number {
  if (!isTriadError(err)) return 500;
  if (err instanceof UpstreamError && err.code === ErrorCode.UpstreamError && err.status >= 400 && err.status < 500) return err.status;
  return STATUS[err.code] ?? 500;
}

function retryAfterOf(err: TriadError): number | undefined {
  if (err instanceof RateLimitedError || err instanceof AdmissionUnavailableError) return err.retryAfter;
  return undefined;
}

/** The request an error answers: messages that are about the request (a path its engines do not serve) name it. */
export interface ErroredRequest {
  readonly method: string;
  readonly path: string;
  readonly model: string;
}

/**
 * The message a client reads for a Triad error: a request error's `clientMessage` (never an endpoint or an
 * address), or for a path the engines have no route for, the method, path and model it was asked for.
 */
export function clientMessageOf(err: TriadError, request?: ErroredRequest): string {
  if (err instanceof PathNotServedError) {
    const asked = request === undefined ? 'this path' : `${request.method} ${echo(request.path)}`;
    const of = request === undefined ? '' : ` of model '${echo(request.model)}'`;
    return (
      `${asked} is not served by the engines${of}: they have no route for it (HTTP 404 Not Found). ` +
      'Send it to a model whose engines serve it (a ModelRoute rule can pick a ModelServer by path)'
    );
  }
  return err instanceof RequestError ? err.clientMessage : err.message;
}

/**
 * Maps any error to its status and OpenAI-shaped body — the only place that does. Engine 4xx answers keep their
 * status (the request was bad for the engine too); engine 5xx and transport failures are 502; messages of
 * errors that are not Triad's are masked, and no message names an endpoint (`clientMessageOf`). A request
 * error's `headers` become response headers (lower-cased; framing headers are never taken); `retryAfter` becomes
 * `Retry-After`, and every 429 has one. `request` lets a message name the request it answers.
 */
export function toOpenAiError(err: unknown, request?: ErroredRequest): OpenAiError {
  if (!isTriadError(err)) return INTERNAL;
  const status = httpStatusOf(err);
  const headers: Record<string, string> = {};
  if (err instanceof RequestError) {
    for (const [name, value] of Object.entries(err.headers)) {
      const lower = name.toLowerCase();
      if (!RESERVED.has(lower)) headers[lower] = value;
    }
  }
  const retryAfter = retryAfterOf(err);
  if (retryAfter !== undefined) headers['retry-after'] = String(Math.max(0, Math.ceil(retryAfter)));
  if (status === 429 && headers['retry-after'] === undefined) headers['retry-after'] = '1';
  const param = err instanceof BadRequestError || err instanceof NotFoundError ? err.param : null;
  const body = JSON.stringify({ error: { message: clientMessageOf(err, request), type: typeFor(status), param, code: err.code } });
  return { status, body, headers };
}

/**
 * Writes a complete error response (nothing was sent to the client yet); returns the status. `traceId`: the request's
 * trace, answered as the first header ({@link TRACE_ID_HEADER}).
 */
export function writeErrorResponse(sink: ClientSink, err: unknown, requestId: string, request?: ErroredRequest, traceId?: string): number {
  const e = toOpenAiError(err, request);
  if (sink.destroyed || sink.headersSent || sink.writableEnded) return e.status;
  sink.writeHead(
    e.status,
    traceId === undefined
      ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(e.body), 'x-request-id': requestId, ...e.headers }
      : {
          [TRACE_ID_HEADER]: traceId,
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(e.body),
          'x-request-id': requestId,
          ...e.headers,
        },
  );
  sink.end(e.body);
  return e.status;
}

/** Ends a stream that already started: an SSE error event, then `[DONE]`, as vLLM does; returns the status. */
export function writeStreamError(sink: ClientSink, err: unknown): number {
  const e = toOpenAiError(err);
  // A stream that already ended (SGLang: decode done, then the prefill failed) keeps its complete answer.
  if (!sink.destroyed && !sink.writableEnded) sink.end(`data: ${e.body}\n\ndata: [DONE]\n\n`);
  return e.status;
}
