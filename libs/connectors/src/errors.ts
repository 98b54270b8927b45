import { ErrorCode } from '@triad/errors';
import { ClientAbortedError, PathNotServedError, TotalTimeoutError, UpstreamError, type LegFailure } from '@triad/request';

/** Where a leg failed: `<stage>[ of item <i>] on <endpoint>` (the client's message leaves ` on <endpoint>` out). */
function where(f: LegFailure): string {
  return `${f.stage}${f.item >= 0 ? ` of item ${f.item}` : ''} on ${f.endpoint}`;
}

/** FastAPI's answer to a path it has no route for (both engines are FastAPI apps); their own 404s say more. */
const NO_ROUTE_MESSAGE = 'Not Found';

/**
 * The engine answered a leg with a non-2xx status; the message carries the engine's own error text. A 404 with
 * FastAPI's bare `Not Found` means the engine has no such path (not a missing model or response id, which vLLM
 * words itself): the request gets a not-found of its own.
 */
export function upstreamHttpError(f: LegFailure, engineMessage: string): UpstreamError {
  if (f.status === 404 && engineMessage === NO_ROUTE_MESSAGE) {
    return new PathNotServedError(`${where(f)} answered HTTP 404: the engine has no route for the path it was sent`, f);
  }
  return new UpstreamError(
    ErrorCode.UpstreamError,
    `${where(f)} failed with HTTP ${f.status}: ${engineMessage}`,
    f,
    f.status >= 500 || f.status === 429,
  );
}

/**
 * A stream opened with 200 whose first event is an error (vLLM reports a request that finished with an error that
 * way once its stream is open): treated as the HTTP 500 the engine would have answered had it not opened the stream.
 */
export function leadingErrorEventError(f: LegFailure, engineMessage: string): UpstreamError {
  const failure = { ...f, status: 500 };
  return new UpstreamError(
    ErrorCode.UpstreamError,
    `${where(failure)} failed with an error event before any token: ${engineMessage}`,
    failure,
    true,
  );
}

/** A leg failed in transport (refused, reset, closed mid-answer). */
export function upstreamTransportError(f: LegFailure, cause: Error): UpstreamError {
  const code = 'code' in cause ? cause.code : undefined;
  const connect = code === 'ECONNREFUSED' || code === 'UND_ERR_CONNECT_TIMEOUT' || code === 'EHOSTUNREACH' || code === 'ENOTFOUND';
  return new UpstreamError(
    connect ? ErrorCode.UpstreamConnect : ErrorCode.UpstreamError,
    `${where(f)} failed: ${cause.message}`,
    f,
    true,
    cause,
  );
}

/** A stage ran out of its time budget (`budget`: the stage, or `first-byte` for the final leg). */
export function stageTimeoutError(f: LegFailure, budget: string, ms: number): UpstreamError {
  return new UpstreamError(ErrorCode.UpstreamTimeout, `${where(f)} exceeded the ${budget} timeout of ${ms} ms`, f, true);
}

/**
 * A leg waited for a free connection to its endpoint (all `limit` busy) longer than its stage budget: the same
 * budget bounds the wait and the first byte, so a hidden queue in the gateway cannot outlast it.
 */
export function connectionWaitTimeoutError(f: LegFailure, ms: number, limit: number, waiting: number): UpstreamError {
  return new UpstreamError(
    ErrorCode.UpstreamTimeout,
    `${where(f)} waited ${ms} ms for a free connection (all ${limit} busy, ${waiting} requests waiting) and timed out`,
    f,
    true,
  );
}

/** The whole request ran out of time. */
export function totalTimeoutError(ms: number): TotalTimeoutError {
  return new TotalTimeoutError(ms);
}

/** The client went away; every leg is aborted with this. */
export function clientAbortedError(): ClientAbortedError {
  return new ClientAbortedError();
}

/** The engine's error message from its error body: OpenAI/vLLM, SGLang flat, FastAPI `detail`, or raw text. */
export function engineErrorMessage(body: Buffer): string {
  const text = body.toString('utf8').trim();
  if (text === '') return 'empty body';
  try {
    const parsed: unknown = JSON.parse(text);
    if (parsed !== null && typeof parsed === 'object') {
      const inner = 'error' in parsed ? parsed.error : undefined;
      if (inner !== null && typeof inner === 'object' && 'message' in inner && typeof inner.message === 'string') return inner.message;
      if (typeof inner === 'string') return inner;
      if ('message' in parsed && typeof parsed.message === 'string') return parsed.message;
      if ('detail' in parsed && parsed.detail !== undefined)
        return typeof parsed.detail === 'string' ? parsed.detail : JSON.stringify(parsed.detail);
    }
  } catch {
    // not JSON: fall through to the raw text
  }
  return text.length > 500 ? `${text.slice(0, 500)}…` : text;
}
