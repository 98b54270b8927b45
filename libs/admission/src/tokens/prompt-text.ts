/**
 * The text of an OpenAI-style request body that counts as input for the rate-limit estimate, rendered the way
 * Kthena renders it for its limiter: `prompt` as is, chat `messages` (plus an Anthropic-style `system`) as
 * ChatML `<|im_start|>{role}\n{content}<|im_end|>\n`, Responses `instructions` + `input`. Unlike Kthena, prompt
 * arrays are joined instead of refused, and non-text parts (images, audio) are skipped, not counted.
 */
export function promptText(body: unknown): string {
  if (!body || typeof body !== 'object') return '';
  const b = body as Record<string, unknown>;
  if (typeof b['prompt'] === 'string') return b['prompt'];
  if (Array.isArray(b['prompt'])) return b['prompt'].filter((p): p is string => typeof p === 'string').join('\n');
  const parts: string[] = [];
  if (Array.isArray(b['messages'])) {
    if (typeof b['system'] === 'string') parts.push(chatml('system', b['system']));
    for (const m of b['messages']) {
      if (!m || typeof m !== 'object') continue;
      const text = contentText((m as Record<string, unknown>)['content']);
      if (text !== '') parts.push(chatml(String((m as Record<string, unknown>)['role'] ?? 'user'), text));
    }
    return parts.join('');
  }
  if (b['input'] !== undefined) {
    if (typeof b['instructions'] === 'string') parts.push(chatml('developer', b['instructions']));
    if (typeof b['input'] === 'string') parts.push(b['input']);
    else if (Array.isArray(b['input'])) {
      for (const item of b['input']) {
        if (typeof item === 'string') parts.push(item);
        else if (item && typeof item === 'object') {
          const text = contentText((item as Record<string, unknown>)['content']);
          if (text !== '') parts.push(chatml(String((item as Record<string, unknown>)['role'] ?? 'user'), text));
        }
      }
    }
    return parts.join('');
  }
  return '';
}

function chatml(role: string, content: string): string {
  return `<|im_start|>${role}\n${content}<|im_end|>\n`;
}

const TEXT_PART_TYPES = new Set(['text', 'input_text', 'output_text']);

function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  const texts: string[] = [];
  for (const part of content) {
    if (part && typeof part === 'object' && TEXT_PART_TYPES.has(String((part as Record<string, unknown>)['type'])) && typeof (part as Record<string, unknown>)['text'] === 'string') {
      texts.push((part as Record<string, unknown>)['text'] as string);
    }
  }
  return texts.join('\n');
}
