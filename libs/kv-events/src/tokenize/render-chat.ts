import { parseChatMessages, UnsupportedChatError, type ChatMediaPart } from './chat-messages';
import type { ChatTemplates } from './chat-templates';

export interface RenderedChat {
  readonly text: string;
  readonly media: readonly ChatMediaPart[];
}

/** Request fields that go to the template as they are (apply_chat_template's own parameters). */
const CONTINUE_TAG = 'CONTINUE_FINAL_MESSAGE_TAG ';

/**
 * Renders an OpenAI chat body as vLLM's chat endpoint does before tokenizing (vllm/renderers/hf.py
 * `safe_apply_chat_template` → transformers `apply_chat_template` / `render_jinja_template`): the template vLLM
 * picks, the messages as vLLM parses them, `tools`, `documents`, `add_generation_prompt` (default true),
 * `continue_final_message` (the final message left open, cut at its end as transformers does), the tokenizer's
 * special tokens (`bos_token`, `eos_token`, …) and `chat_template_kwargs` (which may override any of those; kwargs the
 * template never reads are dropped, as vLLM drops them). Throws {@link UnsupportedChatError} for what only the engine
 * can render (a request-supplied `chat_template`, both generation flags, unsupported parts).
 */
export function renderChat(
  templates: ChatTemplates,
  specialTokens: Readonly<Record<string, unknown>>,
  body: Record<string, unknown>,
): RenderedChat {
  const messages = body['messages'];
  if (!Array.isArray(messages)) throw new UnsupportedChatError('messages is not a list');
  if (body['chat_template'] !== undefined && body['chat_template'] !== null) {
    throw new UnsupportedChatError('a request-supplied chat_template is rendered by the engine only');
  }
  const tools = Array.isArray(body['tools']) && body['tools'].length > 0 ? (body['tools'] as unknown[]) : undefined;
  const template = templates.pick(tools !== undefined);
  if (!template) throw new UnsupportedChatError('the model has no chat template');
  const kwargs: Record<string, unknown> = {
    add_generation_prompt: body['add_generation_prompt'] ?? true,
    continue_final_message: body['continue_final_message'] ?? false,
    documents: body['documents'] ?? null,
  };
  const extra = body['chat_template_kwargs'];
  if (extra !== undefined && extra !== null) {
    if (typeof extra !== 'object' || Array.isArray(extra)) throw new UnsupportedChatError('chat_template_kwargs is not an object');
    if ('chat_template' in extra || 'tokenize' in extra)
      throw new UnsupportedChatError('chat_template_kwargs names chat_template or tokenize');
    Object.assign(kwargs, extra);
  }
  const addGenerationPrompt = kwargs['add_generation_prompt'] === true;
  const continueFinal = kwargs['continue_final_message'];
  if (addGenerationPrompt && continueFinal)
    throw new UnsupportedChatError('add_generation_prompt and continue_final_message are exclusive');
  const { conversation, media } = parseChatMessages(messages, template.contentFormat);
  let finalText: string | undefined;
  if (continueFinal) {
    const field = typeof continueFinal === 'string' ? continueFinal : 'content';
    if (!template.source.includes(field)) throw new UnsupportedChatError(`continue_final_message: the template never reads "${field}"`);
    const last = conversation[conversation.length - 1];
    const value = last?.[field];
    if (typeof value === 'string') {
      finalText = value;
      last[field] = value + CONTINUE_TAG;
    } else if (Array.isArray(value)) {
      const block = [...(value as Record<string, unknown>[])].reverse().find((b) => typeof b['text'] === 'string');
      if (!block) throw new UnsupportedChatError('continue_final_message: the final message has no text');
      finalText = block['text'] as string;
      block['text'] = finalText + CONTINUE_TAG;
    } else {
      throw new UnsupportedChatError('continue_final_message: the final message has no content');
    }
  }
  const context: Record<string, unknown> = { ...specialTokens };
  for (const [k, v] of Object.entries(kwargs)) {
    if (k === 'add_generation_prompt' || k === 'continue_final_message' || k === 'documents' || template.names.has(k)) context[k] = v;
  }
  delete context['continue_final_message'];
  context['messages'] = conversation;
  context['tools'] = tools ?? null;
  context['add_generation_prompt'] = addGenerationPrompt;
  let text = template.compiled.render(context);
  if (finalText !== undefined) {
    const at = text.lastIndexOf(CONTINUE_TAG.trim());
    if (at < 0 || !text.includes(finalText.trim()))
      throw new UnsupportedChatError('continue_final_message: the template dropped the final message');
    text = text.slice(at, at + CONTINUE_TAG.length) === CONTINUE_TAG ? text.slice(0, at) : text.slice(0, at).trimEnd();
  }
  return { text, media };
}
