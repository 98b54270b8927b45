import { BadRequestError, checkBodyLimits, checkRawLimits, type RequestLimits } from '@triad/request';

function bad(message: string, param: string | null): BadRequestError {
  return new BadRequestError(message, param);
}

/** `v`, the body's `field` (read by the caller under its constant name: a named load, not a megamorphic keyed one). */
function checkCount(v: unknown, field: string, min: number): void {
  if (v === undefined || v === null) return;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min) throw bad(`'${field}' must be an integer >= ${min}`, field);
}

/**
 * Parses and sanity-checks an inference body with cheap hand checks (no schema on the hot path): JSON object,
 * non-empty string `model`, boolean `stream`, counts that are integers, `messages` for chat and `prompt` for
 * completions. Everything else is the engine's to judge. Throws a BadRequestError (400) naming the field, or a
 * RequestLimitError (400) naming the limit: nesting is checked on the bytes before parsing, sizes and part
 * counts right after, so nothing downstream (prompt rendering, body rewriting, the encoder fan-out) sees them.
 */
export function parseInferenceBody(raw: Buffer | undefined, path: string, limits: RequestLimits): Record<string, unknown> {
  if (raw === undefined || raw.length === 0) throw bad('request body is empty; expected a JSON object', null);
  checkRawLimits(raw, limits);
  let body: unknown;
  try {
    body = JSON.parse(raw.toString('utf8'));
  } catch (err) {
    throw bad(`request body is not valid JSON: ${(err as Error).message}`, null);
  }
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw bad('request body must be a JSON object', null);
  const b = body as Record<string, unknown>;
  const model = b['model'];
  if (typeof model !== 'string' || model.trim() === '') {
    // SGLang's own /generate has no model field; the gateway still needs one to pick the route (SGLang ignores it).
    if (path === '/generate') throw bad("/generate needs a 'model' field naming the model to route to (SGLang ignores it)", 'model');
    throw bad("you must provide a 'model' parameter (a non-empty string)", 'model');
  }
  checkBodyLimits(b, limits);
  const stream = b['stream'];
  if (stream !== undefined && stream !== null && typeof stream !== 'boolean') throw bad("'stream' must be a boolean", 'stream');
  const options = b['stream_options'];
  if (options !== undefined && options !== null && (typeof options !== 'object' || Array.isArray(options)))
    throw bad("'stream_options' must be an object", 'stream_options');
  checkCount(b['max_tokens'], 'max_tokens', 0);
  checkCount(b['max_completion_tokens'], 'max_completion_tokens', 0);
  checkCount(b['n'], 'n', 1);
  if (path === '/v1/chat/completions') {
    const messages = b['messages'];
    if (!Array.isArray(messages) || messages.length === 0) throw bad("'messages' must be a non-empty array", 'messages');
    for (const m of messages) {
      if (m === null || typeof m !== 'object' || typeof (m as { role?: unknown }).role !== 'string')
        throw bad("every message needs a string 'role'", 'messages');
    }
  } else if (path === '/v1/completions') {
    const prompt = b['prompt'];
    if (typeof prompt !== 'string' && !Array.isArray(prompt)) throw bad("'prompt' must be a string or an array", 'prompt');
  }
  return b;
}
