/*
 * How many prompts and samples a request body asks an engine for, read the way SGLang reads its native `/generate`
 * body (`GenerateReqInput._determine_batch_size`, `_handle_parallel_sampling` and, for beam search,
 * `_handle_beam_search_parallel_sampling`). Admission sizes its output reservation with them, the connectors their
 * bootstrap rooms, sample fan-out and usage counting.
 */

function isObject(v: unknown): v is Readonly<Record<string, unknown>> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/**
 * The prompts of an SGLang `/generate` body. The first input present decides (`text`, then `input_ids`, then
 * `input_embeds`, as in SGLang): a `text` string is one prompt and a list as many as it holds (none for an empty
 * list); `input_ids` one list of token ids is one prompt, a list of lists one per list; `input_embeds` one list of
 * vectors is one prompt, a list of those one each. 1 for anything SGLang refuses (no input, empty `input_ids`,
 * values of the wrong type): the engine answers those with an error.
 */
export function generatePromptCount(body: Readonly<Record<string, unknown>>): number {
  const text = body['text'];
  if (text !== undefined && text !== null) return Array.isArray(text) ? text.length : 1;
  const ids = body['input_ids'];
  if (ids !== undefined && ids !== null) return Array.isArray(ids) && Array.isArray(ids[0]) ? ids.length : 1;
  const embeds = body['input_embeds'];
  if (Array.isArray(embeds) && Array.isArray(embeds[0]) && Array.isArray(embeds[0][0])) return embeds.length;
  return 1;
}

/** A count as given: an integer above 1, else 1 (anything else is the engine's to judge and refuse). */
function countOf(v: unknown): number {
  return typeof v === 'number' && Number.isInteger(v) && v > 1 ? v : 1;
}

/** The sampling params SGLang reads a `/generate` body's `n` and `beam_width` from: the first entry of a list. */
function firstSamplingParams(body: Readonly<Record<string, unknown>>): Readonly<Record<string, unknown>> | undefined {
  const params = body['sampling_params'];
  const first = Array.isArray(params) ? (params[0] as unknown) : params;
  return isObject(first) ? first : undefined;
}

/**
 * The beam width of an SGLang `/generate` body: `sampling_params.beam_width` (with a list, the first entry's, as
 * SGLang's `GenerateReqInput._sampling_params_beam_width` reads it), 1 when the body asks for no beam search. Above
 * 1, the engine runs each prompt as one request that decodes `beam_width` sequences in lockstep and answers once
 * with its best `n` of them (`meta_info.beam_results`); `n` is then no count of parallel samples.
 */
export function generateBeamWidth(body: Readonly<Record<string, unknown>>): number {
  return countOf(firstSamplingParams(body)?.['beam_width']);
}

/**
 * Samples per prompt of an SGLang `/generate` body: the requests the engine runs, and the answers it gives, for
 * each prompt. `sampling_params.n`, or with a list of per-prompt sampling params the first entry's (SGLang refuses
 * a list whose entries ask for different `n`); 1 for a beam search (`generateBeamWidth` above 1), which SGLang does
 * not expand into parallel samples (`_handle_beam_search_parallel_sampling`). A top-level `n` is no `/generate`
 * field: SGLang ignores it.
 */
export function generateSampleCount(body: Readonly<Record<string, unknown>>): number {
  if (generateBeamWidth(body) > 1) return 1;
  return countOf(firstSamplingParams(body)?.['n']);
}

/**
 * Sequences the engine decodes for each prompt of an SGLang `/generate` body, each up to its `max_new_tokens`:
 * its samples, or for a beam search the `beam_width` beams (it returns at most that many, `n`, and counts their
 * tokens in `meta_info.completion_tokens`).
 */
export function generateSequenceCount(body: Readonly<Record<string, unknown>>): number {
  const beams = generateBeamWidth(body);
  return beams > 1 ? beams : generateSampleCount(body);
}

/** SGLang's native generation path: its bodies carry `sampling_params`, never a top-level `n`. */
export const GENERATE_PATH = '/generate';

/**
 * Samples per prompt of a request body sent to `enginePath`: on `/generate` its `sampling_params` decide
 * (`generateSampleCount`: 1 for a beam search, and a top-level `n` there is ignored, as SGLang ignores it),
 * elsewhere the OpenAI APIs' `n`; 1 for a count that is no integer above 1.
 */
export function sampleCount(body: Readonly<Record<string, unknown>>, enginePath: string): number {
  return enginePath === GENERATE_PATH ? generateSampleCount(body) : countOf(body['n']);
}
