import type { EngineKind } from '../options';

/**
 * An error answer of the simulated engine itself (not a Triad error): it carries the HTTP status and the error
 * `type` that vLLM or SGLang would put in the body, and is rendered in that engine's shape.
 */
export class EngineHttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly type: string = errorTypeFor(status),
    readonly param: string | null = null,
  ) {
    super(message);
    this.name = 'EngineHttpError';
  }
}

/** The error `type` both engines use for a status. */
function errorTypeFor(status: number): string {
  switch (status) {
    case 400:
      return 'BadRequestError';
    case 404:
      return 'NotFoundError';
    case 408:
      return 'RequestTimeoutError';
    case 429:
      return 'RateLimitError';
    case 501:
      return 'NotImplementedError';
    case 503:
      return 'ServiceUnavailableError';
    default:
      return status >= 500 ? 'InternalServerError' : 'BadRequestError';
  }
}

interface ErrorFields {
  readonly status: number;
  readonly message: string;
  readonly type: string;
  readonly param: string | null;
}

function fieldsOf(err: EngineHttpError): ErrorFields {
  return { status: err.status, message: err.message, type: err.type, param: err.param };
}

/**
 * HTTP error body: vLLM `{"error":{"message","type","param","code"}}`, SGLang flat
 * `{"object":"error","message","type","param","code"}`; `code` is the HTTP status as an int in both.
 */
export function errorBody(engine: EngineKind, err: EngineHttpError): string {
  const f = fieldsOf(err);
  if (engine === 'vllm') return JSON.stringify({ error: { message: f.message, type: f.type, param: f.param, code: f.status } });
  return JSON.stringify({ object: 'error', message: f.message, type: f.type, param: f.param, code: f.status });
}

/** An error event inside an SSE stream (after the first byte), followed by `[DONE]` as both engines do. */
export function streamErrorEvents(engine: EngineKind, err: EngineHttpError): string {
  const f = fieldsOf(err);
  const error =
    engine === 'vllm'
      ? { message: f.message, type: f.type, param: f.param, code: f.status }
      : { object: 'error', message: f.message, type: f.type, param: f.param, code: f.status };
  return `data: ${JSON.stringify({ error })}\n\ndata: [DONE]\n\n`;
}
