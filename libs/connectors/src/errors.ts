import { ErrorCode, TriadError, isTriadError } from '@triad/errors';
import type { Stage } from '@triad/bus';

/** Where a leg failed: stage, endpoint key, media item (encode) and the engine's HTTP status (0 if none). */
export interface StageFailure {
  readonly stage: Stage;
  readonly endpoint: string;
  readonly item: number;
  readonly status: number;
}

function where(f: StageFailure): string {
  return `${f.stage}${f.item >= 0 ? ` of item ${f.item}` : ''} on ${f.endpoint}`;
}

/** The engine answered a leg with a non-2xx status; `message` carries the engine's own error text. */
export function upstreamHttpError(f: StageFailure, engineMessage: string): TriadError {
  return new TriadError(ErrorCode.UpstreamError, `${where(f)} failed with HTTP ${f.status}: ${engineMessage}`, {
    details: { ...f, retryable: f.status >= 500 || f.status === 429 },
  });
}

/** A leg failed in transport (refused, reset, closed mid-answer). */
export function upstreamTransportError(f: StageFailure, cause: Error): TriadError {
  const code = (cause as { code?: string }).code;
  const connect = code === 'ECONNREFUSED' || code === 'UND_ERR_CONNECT_TIMEOUT' || code === 'EHOSTUNREACH' || code === 'ENOTFOUND';
  return new TriadError(connect ? ErrorCode.UpstreamConnect : ErrorCode.UpstreamError, `${where(f)} failed: ${cause.message}`, {
    cause,
    details: { ...f, retryable: true },
  });
}

/** A stage ran out of its time budget. */
export function stageTimeoutError(f: StageFailure, budget: string, ms: number): TriadError {
  return new TriadError(ErrorCode.UpstreamTimeout, `${where(f)} exceeded the ${budget} timeout of ${ms} ms`, {
    details: { ...f, retryable: budget !== 'total' },
  });
}

/** The whole request ran out of time. */
export function totalTimeoutError(ms: number): TriadError {
  return new TriadError(ErrorCode.UpstreamTimeout, `request exceeded the total timeout of ${ms} ms`, { details: { retryable: false } });
}

/** The client went away; every leg is aborted with this. */
export function clientAbortedError(): TriadError {
  return new TriadError(ErrorCode.ClientAborted, 'client closed the connection', { details: { retryable: false } });
}

/** Whether the stage loop may try the next alternate after `err` (only before any byte reached the client). */
export function isRetryable(err: unknown): boolean {
  return isTriadError(err) && err.details['retryable'] === true;
}

/** The engine's error message from its error body: OpenAI/vLLM, SGLang flat, FastAPI `detail`, or raw text. */
export function engineErrorMessage(body: Buffer): string {
  const text = body.toString('utf8').trim();
  if (text === '') return 'empty body';
  try {
    const parsed = JSON.parse(text) as Record<string, unknown>;
    const inner = parsed['error'];
    if (inner !== null && typeof inner === 'object' && typeof (inner as { message?: unknown }).message === 'string') {
      return (inner as { message: string }).message;
    }
    if (typeof inner === 'string') return inner;
    if (typeof parsed['message'] === 'string') return parsed['message'];
    if (parsed['detail'] !== undefined) return typeof parsed['detail'] === 'string' ? parsed['detail'] : JSON.stringify(parsed['detail']);
  } catch {
    // not JSON: fall through to the raw text
  }
  return text.length > 500 ? `${text.slice(0, 500)}…` : text;
}
