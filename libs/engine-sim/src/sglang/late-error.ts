import type { OutgoingHttpHeaders } from 'node:http';
import { EngineHttpError, errorBody, streamErrorEvents } from '../http/engine-error';
import type { Exchange } from '../http/router';
import { sendJson, startEventStream } from '../http/respond';
import type { RequestKind } from '../openai/inference-request';

const DONE = 'data: [DONE]\n\n';

/**
 * `/generate`'s own error body for a request the tokenizer rejected (a ValueError: 400): `{"error":{"message"}}`.
 * Other statuses and the OpenAI routes use SGLang's flat `{"object":"error",…}` body.
 */
export function sglangErrorBody(kind: RequestKind, err: EngineHttpError): string {
  if (kind === 'generate' && err.status === 400) return JSON.stringify({ error: { message: err.message } });
  return errorBody('sglang', err);
}

/**
 * Answers with an error found after the request was dispatched (tokenizer range checks, scheduler aborts, failed
 * transfers). A streamed request already has its 200 and SSE headers (SGLang starts streams at once), so the error
 * is an event followed by `[DONE]`; a plain one gets the status and body.
 */
export function sendDispatchedError(
  ex: Exchange,
  kind: RequestKind,
  stream: boolean,
  err: EngineHttpError,
  headers: OutgoingHttpHeaders,
): void {
  if (ex.res.destroyed) return;
  if (!stream) {
    if (ex.res.headersSent) {
      ex.res.destroy();
      return;
    }
    sendJson(ex.res, err.status, sglangErrorBody(kind, err), headers);
    return;
  }
  if (!ex.res.headersSent) startEventStream(ex.res, headers);
  if (kind === 'generate') ex.res.end(`data: ${JSON.stringify({ error: { message: err.message } })}\n\n${DONE}`);
  else ex.res.end(streamErrorEvents('sglang', err));
}
