// What the first event of an engine's stream says before anything reached the client: an error event (vLLM, SGLang's
// OpenAI routes and tokenizer errors) or, on SGLang's /generate, the output its scheduler aborted. The leg reads it
// to answer a refusal as the 4xx it is, or to fail the leg as the 5xx the engine would have answered had its stream
// not been open (retried like one).
import { engineErrorMessage } from './errors';

const ERROR_EVENT = /^data: ?\{\s*"error"\s*:/;

/** The JSON of an SSE text's first event when that event is an error event (`data: {"error": …}`), else undefined. */
export function leadingErrorEvent(out: Buffer): string | undefined {
  const head = out.toString('utf8', 0, Math.min(out.length, 64));
  if (!ERROR_EVENT.test(head)) return undefined;
  const text = out.toString('utf8');
  const end = text.indexOf('\n');
  return text.slice(text.indexOf('{'), end < 0 ? undefined : end);
}

/** The 4xx an engine's leading error event names in its `code` (vLLM and SGLang put the HTTP status there), if any. */
export function clientErrorStatusOf(event: string): number | undefined {
  try {
    const parsed = JSON.parse(event) as { error?: { code?: unknown } };
    const code = parsed.error?.code;
    return typeof code === 'number' && Number.isInteger(code) && code >= 400 && code < 500 ? code : undefined;
  } catch {
    return undefined;
  }
}

/** Looked for natively in the first event before anything is decoded: almost no stream names an abort. */
const ABORT_TYPE = Buffer.from('"abort"');

/** Where an SGLang `/generate` stream's event says the scheduler aborted the request (quotes unescaped: not in a string). */
const ABORT_FINISH = /"finish_reason"\s*:\s*\{\s*"type"\s*:\s*"abort"/;

/**
 * The status and message of an SGLang `/generate` stream whose first event is the aborted output: its scheduler
 * refuses some requests only after dispatch (beam search on PD, a PD request without a room) and fails others there
 * (a decode whose KV never arrived: 500), and SGLang's tokenizer manager yields either as an output whose
 * `meta_info.finish_reason` is `{type: "abort", message, status_code}`, not as an error event. Undefined for any
 * other first event and for an abort without a 4xx or 5xx `status_code` (relayed as sent).
 */
export function leadingAbort(out: Buffer): { readonly status: number; readonly message: string } | undefined {
  // The first event only (a zero-latency engine's first read can hold the whole answer).
  const end = out.indexOf(10);
  const first = end < 0 ? out : out.subarray(0, end);
  if (!first.includes(ABORT_TYPE)) return undefined;
  const line = first.toString('utf8');
  if (!line.startsWith('data:') || !ABORT_FINISH.test(line)) return undefined;
  try {
    return abortOf(JSON.parse(line.slice(5)));
  } catch {
    return undefined;
  }
}

/**
 * The status and message of a parsed SGLang `/generate` output whose `meta_info.finish_reason` is an abort with a 4xx
 * or 5xx `status_code`; undefined for any other event.
 */
export function abortOf(event: unknown): { readonly status: number; readonly message: string } | undefined {
  const finish = (event as { meta_info?: { finish_reason?: { type?: unknown; status_code?: unknown; message?: unknown } } } | null)
    ?.meta_info?.finish_reason;
  const status = finish?.status_code;
  if (finish?.type !== 'abort' || typeof status !== 'number' || !Number.isInteger(status) || status < 400 || status >= 600)
    return undefined;
  return { status, message: typeof finish.message === 'string' ? finish.message : 'the engine aborted the request' };
}

/**
 * What an engine stream's first event says went wrong, in either shape (an error event, or SGLang `/generate`'s
 * aborted output): `status` is the 4xx the engine refused with, or 500 and up for a failure (an error event without a
 * 4xx `code` is a 500). Undefined when the first event is an answer.
 */
export function leadingFailure(out: Buffer): { readonly status: number; readonly message: string } | undefined {
  const event = leadingErrorEvent(out);
  if (event !== undefined) return { status: clientErrorStatusOf(event) ?? 500, message: engineErrorMessage(Buffer.from(event)) };
  return leadingAbort(out);
}
