import { STATUS_CODES, type OutgoingHttpHeaders } from 'node:http';
import { EngineHttpError, errorBody } from '../http/engine-error';
import type { Exchange } from '../http/router';
import { sendJson, startEventStream } from '../http/respond';
import type { RequestKind } from '../openai/inference-request';
import { generateMetaInfo } from '../openai/sglang-format';

const DONE = 'data: [DONE]\n\n';

/**
 * Where a dispatched request failed, which decides how SGLang reports it: `tokenizer` is a ValueError the
 * tokenizer manager raises (DP rank out of range); `abort` is the scheduler's `prepare_abort` (missing room, beam
 * refusals, failed KV transfers), a `FINISH_ABORT` carrying the status.
 */
export type DispatchedErrorSource = 'tokenizer' | 'abort';

/** The request the error belongs to: its rid and prompt tokens per prompt (a batch has several). */
export interface AbortedRequest {
  readonly rids: readonly string[];
  readonly promptTokens: readonly number[];
  readonly batched: boolean;
}

/**
 * `/generate`'s own error body for a request the tokenizer rejected (a ValueError: 400): `{"error":{"message"}}`.
 * Other statuses and the OpenAI routes use SGLang's flat `{"object":"error",…}` body.
 */
export function sglangErrorBody(kind: RequestKind, err: EngineHttpError): string {
  if (kind === 'generate' && err.status === 400) return JSON.stringify({ error: { message: err.message } });
  return errorBody('sglang', err);
}

/**
 * A non-streamed answer: a 400 abort is raised as a ValueError (400 body above), a 5xx abort as an HTTPException,
 * which SGLang's exception handler writes with the status as its `type` (`"500"`).
 */
function plainErrorBody(kind: RequestKind, err: EngineHttpError): string {
  if (err.status >= 500) return errorBody('sglang', new EngineHttpError(err.status, err.message, String(err.status), err.param));
  return sglangErrorBody(kind, err);
}

/** `HTTPStatus(code).name` in Python: `BAD_REQUEST`, `INTERNAL_SERVER_ERROR`, … */
function statusName(status: number): string {
  return (STATUS_CODES[status] ?? 'Unknown').toUpperCase().replace(/[^A-Z0-9]+/g, '_');
}

/**
 * `/generate`'s stream for a scheduler abort: the tokenizer manager yields the aborted output itself (no text, no
 * ids, `meta_info.finish_reason` = `FINISH_ABORT.to_json()` with the status), one per prompt, then `[DONE]`.
 */
function generateAbortEvents(err: EngineHttpError, req: AbortedRequest): string {
  const finish = JSON.stringify({ type: 'abort', message: err.message, status_code: err.status, err_type: null });
  let out = '';
  req.rids.forEach((rid, i) => {
    const view = { id: rid, promptTokens: req.promptTokens[i] ?? 0, cachedTokens: 0 };
    const index = req.batched ? `,"index":${i}` : '';
    out += `data: {"text":"","output_ids":[],"meta_info":${generateMetaInfo(view, 0, finish)}${index}}\n\n`;
  });
  return out + DONE;
}

/**
 * The events of an error inside an open stream. `/generate`: a tokenizer ValueError is
 * `{"error":{"message","type":"invalid_request_error","code":400,"retryable":false}}`, a scheduler abort the aborted
 * output. OpenAI routes: an abort with a status is `create_streaming_error_response(message, status.name, status)`.
 */
function streamedErrorEvents(kind: RequestKind, source: DispatchedErrorSource, err: EngineHttpError, req: AbortedRequest): string {
  if (kind === 'generate') {
    if (source === 'abort') return generateAbortEvents(err, req);
    const error = { message: err.message, type: 'invalid_request_error', code: 400, retryable: false };
    return `data: ${JSON.stringify({ error })}\n\n${DONE}`;
  }
  const type = source === 'abort' ? statusName(err.status) : err.type;
  const error = { object: 'error', message: err.message, type, param: err.param, code: err.status };
  return `data: ${JSON.stringify({ error })}\n\n${DONE}`;
}

/**
 * Answers with an error found after the request was dispatched (tokenizer range checks, scheduler aborts, failed
 * transfers). A streamed request already has its 200 and SSE headers, so the error is written inside the stream as
 * SGLang does; a plain one gets the status and body.
 */
export function sendDispatchedError(
  ex: Exchange,
  kind: RequestKind,
  stream: boolean,
  source: DispatchedErrorSource,
  err: EngineHttpError,
  req: AbortedRequest,
  headers: OutgoingHttpHeaders,
): void {
  if (ex.res.destroyed) return;
  if (!stream) {
    if (ex.res.headersSent) {
      ex.res.destroy();
      return;
    }
    sendJson(ex.res, err.status, plainErrorBody(kind, err), headers);
    return;
  }
  if (!ex.res.headersSent) startEventStream(ex.res, headers);
  ex.res.end(streamedErrorEvents(kind, source, err, req));
}
