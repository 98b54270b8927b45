import type { ContentFormat } from './content-format';

/** A media part of a chat request, in message order: its URL (or data URL) and the client's `uuid`, if any. */
export interface ChatMediaPart {
  readonly modality: 'image';
  readonly url: string;
  readonly uuid: string | undefined;
}

export interface ParsedChat {
  /** The messages as the template receives them. */
  readonly conversation: Record<string, unknown>[];
  readonly media: readonly ChatMediaPart[];
}

/** Why a request's messages cannot be rendered the way the engine would (the request gets no block keys). */
export class UnsupportedChatError extends Error {}

const TEXT_PART_TYPES = new Set(['text', 'input_text', 'output_text', 'refusal', 'thinking']);
/** Part fields vLLM consumes; any other field of a part is passed to `openai`-format templates as it is. */
const KNOWN_PART_FIELDS = new Set(['type', 'text', 'refusal', 'thinking', 'image_url', 'uuid', 'input_audio', 'audio_url', 'video_url']);
const BILLING_HEADER = 'x-anthropic-billing-header';

type Part = Record<string, unknown>;

function extraFields(part: Part): Part {
  const out: Part = {};
  for (const [k, v] of Object.entries(part)) if (!KNOWN_PART_FIELDS.has(k)) out[k] = v;
  return out;
}

/** vLLM drops Claude Code's per-request attribution line from system text (it would defeat the prefix cache). */
function stripBillingHeader(parts: readonly unknown[]): unknown[] {
  const out: unknown[] = [];
  for (const part of parts) {
    const text = typeof part === 'string' ? part : (part as Part | null)?.['type'] === 'text' ? (part as Part)['text'] : undefined;
    if (typeof text !== 'string' || !text.startsWith(BILLING_HEADER)) {
      out.push(part);
      continue;
    }
    const rest = text.slice(text.indexOf('\n') + 1);
    if (!text.includes('\n') || rest === '') continue;
    out.push(typeof part === 'string' ? rest : { ...(part as Part), text: rest });
  }
  return out;
}

function mediaUrl(part: Part, field: 'image_url' | 'input_image'): string {
  const v = part[field];
  const url = typeof v === 'string' ? v : (v as { url?: unknown } | null)?.url;
  if (typeof url !== 'string') throw new UnsupportedChatError(`a ${field} part has no url`);
  return url;
}

/**
 * The conversation vLLM renders for OpenAI chat `messages` (vllm/entrypoints/chat_utils: `_parse_chat_message_content`,
 * `_postprocess_messages`): text parts joined with "\n" for `string`-format templates, kept as `{type: "text"}`
 * parts (and images as `{type: "image"}`) for `openai`-format ones; assistant `tool_calls` (arguments parsed from
 * JSON text into objects, an empty list dropped) and `reasoning`; tool `tool_call_id`, with list content of text
 * parts joined; `name`. Other message fields do not reach the template. Audio, video and embeddings throw
 * {@link UnsupportedChatError}: their placeholders and hashes need the engine.
 */
export function parseChatMessages(messages: readonly unknown[], format: ContentFormat): ParsedChat {
  const conversation: Record<string, unknown>[] = [];
  const media: ChatMediaPart[] = [];
  for (const raw of messages) {
    if (typeof raw !== 'object' || raw === null) throw new UnsupportedChatError('a message is not an object');
    const message = raw as Part;
    const role = message['role'];
    if (typeof role !== 'string') throw new UnsupportedChatError('a message has no role');
    let content = message['content'];
    if (content === null || content === undefined) content = [];
    else if (typeof content === 'string') content = [{ type: 'text', text: content }];
    if (!Array.isArray(content)) throw new UnsupportedChatError('message content is neither text nor a list of parts');
    if (role === 'system') content = stripBillingHeader(content);
    const parts: unknown[] = [];
    for (const item of content as unknown[]) {
      if (typeof item === 'string') {
        parts.push(format === 'openai' ? { type: 'text', text: item } : item);
        continue;
      }
      const part = item as Part;
      const type = part['type'];
      if (typeof type === 'string' && TEXT_PART_TYPES.has(type)) {
        const text = type === 'refusal' ? part['refusal'] : part['text'];
        if (text === null || text === undefined) continue;
        parts.push(format === 'openai' ? { type: 'text', text, ...extraFields(part) } : text);
      } else if (type === 'image_url' || type === 'input_image' || (type === undefined && 'image_url' in part)) {
        const uuid = part['uuid'];
        media.push({
          modality: 'image',
          url: mediaUrl(part, type === 'input_image' ? 'input_image' : 'image_url'),
          uuid: uuid === undefined || uuid === null ? undefined : String(uuid),
        });
        if (format === 'openai') parts.push({ type: 'image', ...extraFields(part) });
        else throw new UnsupportedChatError('images with a string-format template are placed by the model processor');
      } else {
        throw new UnsupportedChatError(`content part type ${JSON.stringify(type)} is not reproduced outside the engine`);
      }
    }
    const out: Record<string, unknown> = { role, content: format === 'openai' ? parts : parts.join('\n') };
    if (role === 'assistant') {
      if (message['tool_calls'] !== undefined && message['tool_calls'] !== null) out['tool_calls'] = toolCalls(message['tool_calls']);
      if (message['reasoning'] !== undefined && message['reasoning'] !== null) {
        out['reasoning'] = message['reasoning'];
        out['reasoning_content'] = message['reasoning'];
      }
    } else if (role === 'tool') {
      if ('tool_call_id' in message) out['tool_call_id'] = message['tool_call_id'];
      const c = out['content'];
      if (Array.isArray(c) && c.every((p) => (p as Part)['type'] === 'text'))
        out['content'] = c.map((p) => (p as Part)['text'] ?? '').join('\n');
    }
    if (typeof message['name'] === 'string') out['name'] = message['name'];
    if (Array.isArray(out['tool_calls']) && (out['tool_calls'] as unknown[]).length === 0) delete out['tool_calls'];
    conversation.push(out);
  }
  return { conversation, media };
}

/** Tool calls as templates expect them: `function.arguments` an object (parsed from the API's JSON text), `{}` when empty. */
function toolCalls(raw: unknown): unknown {
  if (!Array.isArray(raw)) return raw;
  return raw.map((call: unknown) => {
    if (typeof call !== 'object' || call === null) throw new UnsupportedChatError('a tool call is not an object');
    const fn = (call as Part)['function'];
    if (typeof fn !== 'object' || fn === null) return call;
    const args = (fn as Part)['arguments'];
    let parsed: unknown = {};
    if (args) {
      if (typeof args === 'object') parsed = args;
      else {
        try {
          parsed = JSON.parse(String(args));
        } catch {
          throw new UnsupportedChatError('tool call arguments are not JSON');
        }
      }
    }
    return { ...(call as Part), function: { ...(fn as Part), arguments: parsed } };
  });
}
