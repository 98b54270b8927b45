/**
 * Why a streamed request cannot be resumed exactly, or undefined when it can. Only what a continuation reproduces
 * byte for byte qualifies: one choice of plain text. `n > 1` would need one continuation per choice, logprobs would
 * change (the continued text becomes prompt, whose logprobs the engines do not stream), tool calls and structured
 * outputs are parsed or constrained from the start of the answer (a continuation would restart the parser or the
 * grammar mid-answer), and `echo` would repeat the prompt with the continued text.
 */
export function resumeRefusal(path: string, body: Record<string, unknown>): string | undefined {
  const chat = path === '/v1/chat/completions';
  if (!chat && path !== '/v1/completions') return 'path';
  const n = body['n'];
  if (n !== undefined && n !== null && n !== 1) return 'n';
  if (isSet(body['logprobs']) || hasValue(body['top_logprobs']) || isSet(body['prompt_logprobs'])) return 'logprobs';
  if (body['echo'] === true) return 'echo';
  if (Array.isArray(body['tools']) && body['tools'].length > 0 && body['tool_choice'] !== 'none') return 'tools';
  const format = body['response_format'] as { type?: unknown } | undefined;
  if (format !== undefined && format !== null && format.type !== 'text') return 'structured_output';
  for (const key of GUIDED_FIELDS) if (hasValue(body[key])) return 'structured_output';
  if (chat) {
    if (body['continue_final_message'] === true) return 'continued_by_client';
  } else if (typeof body['prompt'] !== 'string' || hasValue(body['suffix'])) {
    return 'prompt';
  }
  return undefined;
}

const GUIDED_FIELDS = [
  'structured_outputs',
  'guided_json',
  'guided_regex',
  'guided_choice',
  'guided_grammar',
  'regex',
  'ebnf',
  'json_schema',
];

function hasValue(v: unknown): boolean {
  return v !== undefined && v !== null && v !== false && v !== 0;
}

/** Completions' `logprobs: 0` still returns the sampled token's logprob. */
function isSet(v: unknown): boolean {
  return v !== undefined && v !== null && v !== false;
}
