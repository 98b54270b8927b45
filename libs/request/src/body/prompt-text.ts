/** How much of a request body counts as its prompt. */
export interface PromptTextOptions {
  /**
   * Everything the rate limiter counts as input (admission), not only what Kthena hashes for prefix caching
   * (scheduling): also prompt arrays (joined by newlines), an Anthropic-style `system`, the Responses API's
   * `instructions` + `input`, and non-string roles in their string form (rather than `user`).
   */
  readonly allInputs?: boolean;
  /**
   * Text standing for a media part at its place in the prompt (e.g. its content key), or undefined to skip it.
   * Prefix hashing uses it so that the same text around a different image is not taken for a cached prefix.
   */
  readonly mediaMarker?: (part: object) => string | undefined;
}

const TEXT_PART_TYPES: ReadonlySet<unknown> = new Set(['text', 'input_text', 'output_text']);

/** Text of one message content: the string, or its text parts joined by newlines (media parts are skipped). */
function contentText(content: unknown, mediaMarker?: (part: object) => string | undefined): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  let out = '';
  for (const part of content) {
    if (part === null || typeof part !== 'object') continue;
    let text: string | undefined;
    if ('text' in part && typeof part.text === 'string' && 'type' in part && TEXT_PART_TYPES.has(part.type)) text = part.text;
    else if (mediaMarker) text = mediaMarker(part);
    if (text === undefined) continue;
    out = out === '' ? text : `${out}\n${text}`;
  }
  return out;
}

function chatml(role: string, content: string): string {
  return `<|im_start|>${role}\n${content}<|im_end|>\n`;
}

function roleOf(message: object, allInputs: boolean): string {
  const role = 'role' in message ? message.role : undefined;
  if (typeof role === 'string') return role;
  return allInputs && role !== undefined && role !== null ? String(role) : 'user';
}

/** Chat items (messages, Responses input items) rendered ChatML-style from their text, skipping empty ones. */
function renderItems(
  items: readonly unknown[],
  allInputs: boolean,
  rawStrings: boolean,
  mediaMarker?: (part: object) => string | undefined,
): string {
  let out = '';
  for (const item of items) {
    if (rawStrings && typeof item === 'string') {
      out += item;
      continue;
    }
    if (item === null || typeof item !== 'object') continue;
    const text = contentText('content' in item ? item.content : undefined, mediaMarker);
    if (text !== '') out += chatml(roleOf(item, allInputs), text);
  }
  return out;
}

/**
 * The prompt text of an OpenAI-style request body, as Kthena renders it: a completion's `prompt` string, or chat
 * `messages` as ChatML `<|im_start|>{role}\n{text}<|im_end|>\n` from their text parts (media parts skipped).
 * The gateway hashes it for prefix-cache scheduling and estimates input tokens from it; admission, with
 * `allInputs`, re-estimates tokens from everything a request carries.
 */
export function promptText(body: Readonly<Record<string, unknown>> | null | undefined, options?: PromptTextOptions): string {
  if (body === null || body === undefined) return '';
  const allInputs = options?.allInputs === true;
  const prompt = body['prompt'];
  if (typeof prompt === 'string') return prompt;
  if (allInputs && Array.isArray(prompt)) return prompt.filter((p) => typeof p === 'string').join('\n');
  const messages = body['messages'];
  if (Array.isArray(messages)) {
    const system = body['system'];
    const head = allInputs && typeof system === 'string' ? chatml('system', system) : '';
    return head + renderItems(messages, allInputs, false, options?.mediaMarker);
  }
  const input = body['input'];
  if (!allInputs || input === undefined) return '';
  const instructions = body['instructions'];
  const head = typeof instructions === 'string' ? chatml('developer', instructions) : '';
  if (typeof input === 'string') return head + input;
  return Array.isArray(input) ? head + renderItems(input, true, true) : head;
}
