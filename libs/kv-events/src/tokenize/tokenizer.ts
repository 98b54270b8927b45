import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type * as HfTokenizers from '@huggingface/tokenizers';
import type * as HfJinja from '@huggingface/jinja';

/** A model's tokenizer as the engines use it for prefix caching: text → token ids, chat → prompt text. */
export interface ModelTokenizer {
  encode(text: string, addSpecialTokens: boolean): number[];
  /** Renders chat messages with the model's template (add_generation_prompt), or undefined without one. */
  renderChat: ((messages: unknown[]) => string) | undefined;
}

/**
 * Loads `tokenizer.json` (a file, or a directory holding it) and, beside it, `tokenizer_config.json` (special tokens
 * and the chat template). Never downloads anything: the file is shipped with the image or mounted.
 */
export function loadTokenizer(path: string): ModelTokenizer {
  const file = existsSync(path) && statSync(path).isDirectory() ? join(path, 'tokenizer.json') : path;
  const { Tokenizer } = require('@huggingface/tokenizers') as typeof HfTokenizers;
  const cfgFile = join(dirname(file), 'tokenizer_config.json');
  const cfg = existsSync(cfgFile) ? (JSON.parse(readFileSync(cfgFile, 'utf8')) as Record<string, unknown>) : {};
  const tokenizer = new Tokenizer(JSON.parse(readFileSync(file, 'utf8')) as object, cfg);
  const template = typeof cfg['chat_template'] === 'string' ? cfg['chat_template'] : undefined;
  let renderChat: ModelTokenizer['renderChat'];
  if (template) {
    const { Template } = require('@huggingface/jinja') as typeof HfJinja;
    const compiled = new Template(template);
    const special = (name: string): string => {
      const v = cfg[name];
      return typeof v === 'string'
        ? v
        : typeof (v as { content?: unknown } | null)?.content === 'string'
          ? (v as { content: string }).content
          : '';
    };
    renderChat = (messages) =>
      compiled.render({ messages, add_generation_prompt: true, bos_token: special('bos_token'), eos_token: special('eos_token') });
  }
  return { encode: (text, add) => tokenizer.encode(text, { add_special_tokens: add }).ids, renderChat };
}

/**
 * The token ids an engine computes for an OpenAI request body, as vLLM's serving layer does: a completion's
 * `prompt` string with the tokenizer's special tokens (a list of token ids as it is), chat `messages` rendered with
 * the model's chat template (`add_generation_prompt`) and encoded without extra special tokens. Undefined when the
 * ids depend on more than the tokenizer: media parts (placeholder counts come from the model's processor), prompt
 * embeddings, chat without a template, a template that fails.
 */
export function promptTokenIds(t: ModelTokenizer, body: Record<string, unknown>): number[] | undefined {
  if (body['prompt_embeds'] !== undefined) return undefined;
  let prompt = body['prompt'];
  if (Array.isArray(prompt) && prompt.length === 1 && (typeof prompt[0] === 'string' || Array.isArray(prompt[0]))) prompt = prompt[0];
  if (typeof prompt === 'string') return t.encode(prompt, true);
  if (Array.isArray(prompt)) return prompt.length > 0 && prompt.every((x) => Number.isInteger(x)) ? (prompt as number[]) : undefined;
  const messages = body['messages'];
  if (!Array.isArray(messages) || !t.renderChat) return undefined;
  for (const m of messages) {
    const content = (m as { content?: unknown } | null)?.content;
    if (Array.isArray(content) && content.some((p) => (p as { type?: unknown } | null)?.type !== 'text')) return undefined;
  }
  return t.encode(t.renderChat(messages), false);
}
