import { ErrorCode, isTriadError, type ErrorCodeValue } from '@triad/errors';
import type { ClientSink } from './types';

/**
 * HTTP status of every ErrorCode on the OpenAI-compatible surface — the one mapping for this transport
 * (TypeScript makes it exhaustive). Engine errors are refined in {@link toOpenAiError}.
 */
const STATUS: Readonly<Record<ErrorCodeValue, number>> = {
  [ErrorCode.CrdInvalid]: 500,
  [ErrorCode.ConfigInvalid]: 500,
  [ErrorCode.BusMessageInvalid]: 503,
  [ErrorCode.BusUnavailable]: 503,
  [ErrorCode.SchedNoCandidates]: 503,
  [ErrorCode.SchedFilteredOut]: 503,
  [ErrorCode.SchedNoPrefillPair]: 503,
  [ErrorCode.SchedNoEncoder]: 503,
  [ErrorCode.SchedUnknownModelServer]: 404,
  [ErrorCode.SchedBadRequest]: 400,
  [ErrorCode.SchedTimeout]: 504,
  [ErrorCode.GatewayBadRequest]: 400,
  [ErrorCode.GatewayModelNotFound]: 404,
  [ErrorCode.GatewayBodyTooLarge]: 413,
  [ErrorCode.GatewayRateLimited]: 429,
  [ErrorCode.GatewayUnauthorized]: 401,
  [ErrorCode.GatewayForbidden]: 403,
  [ErrorCode.GatewayNoEndpoint]: 503,
  [ErrorCode.GatewayQueueTimeout]: 504,
  [ErrorCode.AdmissionUnavailable]: 503,
  [ErrorCode.UpstreamError]: 502,
  [ErrorCode.UpstreamTimeout]: 504,
  [ErrorCode.UpstreamConnect]: 502,
  [ErrorCode.ClientAborted]: 499,
  [ErrorCode.Internal]: 500,
};

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
  /** Extra response headers (Retry-After on 429, the error's own `details.headers` such as WWW-Authenticate on 401). */
  readonly headers: Record<string, string>;
}

/** Headers the error response frames itself; an error's `details.headers` never replace them. */
const RESERVED = new Set(['content-type', 'content-length', 'transfer-encoding', 'connection', 'x-request-id']);

function copyDetailHeaders(from: unknown, to: Record<string, string>): void {
  if (typeof from !== 'object' || from === null) return;
  for (const [name, value] of Object.entries(from)) {
    const lower = name.toLowerCase();
    if (typeof value === 'string' && !RESERVED.has(lower)) to[lower] = value;
  }
}

/**
 * Maps any error to its status and OpenAI-shaped body. Engine 4xx answers keep their status (the request was
 * bad for the engine too); engine 5xx and transport failures are 502; 5xx messages of unexpected errors are masked.
 * String entries of `details.headers` become response headers (lower-cased; framing headers are never taken).
 */
export function toOpenAiError(err: unknown): OpenAiError {
  let status = 500;
  let code: string = ErrorCode.Internal;
  let message = 'internal error';
  let param: string | null = null;
  const headers: Record<string, string> = {};
  if (isTriadError(err)) {
    code = err.code;
    status = STATUS[err.code] ?? 500;
    message = err.message;
    const engineStatus = err.details['status'];
    if (err.code === ErrorCode.UpstreamError && typeof engineStatus === 'number' && engineStatus >= 400 && engineStatus < 500) status = engineStatus;
    if (typeof err.details['param'] === 'string') param = err.details['param'];
    // Admission refusals carry their response headers (WWW-Authenticate, Retry-After) in `details.headers`.
    copyDetailHeaders(err.details['headers'], headers);
    const retryAfter = err.details['retryAfterSeconds'];
    if (typeof retryAfter === 'number') headers['retry-after'] = String(Math.max(0, Math.ceil(retryAfter)));
  }
  if (status === 429 && headers['retry-after'] === undefined) headers['retry-after'] = '1';
  const body = JSON.stringify({ error: { message, type: typeFor(status), param, code } });
  return { status, body, headers };
}

/** Writes a complete error response (nothing was sent to the client yet). */
export function writeErrorResponse(sink: ClientSink, err: unknown, requestId: string): number {
  const e = toOpenAiError(err);
  if (sink.destroyed || sink.headersSent || sink.writableEnded) return e.status;
  sink.writeHead(e.status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(e.body), 'x-request-id': requestId, ...e.headers });
  sink.end(e.body);
  return e.status;
}

/** Ends a stream that already started: an SSE error event, then `[DONE]`, as vLLM does. */
export function writeStreamError(sink: ClientSink, err: unknown): number {
  const e = toOpenAiError(err);
  // A stream that already ended (SGLang: decode done, then the prefill failed) keeps its complete answer.
  if (!sink.destroyed && !sink.writableEnded) sink.end(`data: ${e.body}\n\ndata: [DONE]\n\n`);
  return e.status;
}
