import type { ParsedBody } from '../http/body';
import { EngineHttpError } from '../http/engine-error';
import type { EngineKind } from '../options';
import { chatStart, completionStart, type OutputStart } from '../engine/continuation';
import { countTextTokens, fnv1a } from '../engine/tokens';
import { MEDIA_TOKENS, mediaItemOf, type MediaItem } from './media';

export type RequestKind = 'chat' | 'completion' | 'generate';

/** A validated inference request, reduced to what the simulator needs. */
export interface InferenceRequest {
  readonly kind: RequestKind;
  readonly body: Record<string, unknown>;
  readonly model: string | undefined;
  /** Prompt as text (media replaced by short content hashes): keys the output and the prefix cache. */
  readonly promptText: string;
  readonly promptTokens: number;
  readonly media: readonly MediaItem[];
  /** Non-empty text pieces in the prompt (a vLLM encoder accepts none). */
  readonly textParts: number;
  readonly maxTokens: number | undefined;
  readonly minTokens: number | undefined;
  readonly ignoreEos: boolean;
  readonly stream: boolean;
  readonly includeUsage: boolean;
  readonly continuousUsage: boolean;
  /** Seeds the deterministic output (prompt + `seed`). */
  readonly outputKey: number;
  /** Output tokens of `outputKey` the request already holds: a continued answer (engine/continuation.ts). */
  readonly outputOffset: number;
  /** The prompt as a sequence of pieces in token order (what the engine core hashes KV blocks over). */
  readonly pieces: readonly PromptPiece[];
}

/**
 * A run of prompt tokens with one content key: a message's role header, a text part, a media item's placeholders.
 * Two prompts share KV blocks as far as they share pieces (same keys, same order).
 */
export interface PromptPiece {
  readonly key: number;
  readonly tokens: number;
  /** Index into `media` for a media item's placeholders. */
  readonly media?: number;
}

const CHAT_MESSAGE_OVERHEAD_TOKENS = 4;
const CHAT_GENERATION_PROMPT_TOKENS = 3;

function bad(message: string, param: string | null = null): EngineHttpError {
  return new EngineHttpError(400, message, 'BadRequestError', param);
}

function asObject(body: ParsedBody): Record<string, unknown> {
  if (!body.ok) throw bad(`JSON decode error: ${body.error}`);
  const v = body.value;
  if (!v || typeof v !== 'object' || Array.isArray(v)) throw bad('Input should be a valid dictionary or object to extract fields from');
  return v as Record<string, unknown>;
}

function optionalInt(obj: Record<string, unknown>, field: string, min: number): number | undefined {
  const v = obj[field];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isInteger(v)) throw bad(`${field}: Input should be a valid integer`, field);
  if (v < min) throw bad(`${field} must be at least ${min}, got ${v}.`, field);
  return v;
}

function optionalBool(obj: Record<string, unknown>, field: string): boolean | undefined {
  const v = obj[field];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'boolean') throw bad(`${field}: Input should be a valid boolean`, field);
  return v;
}

interface Prompt {
  readonly text: string;
  /** A chat's final assistant message continued (`continue_final_message`): the text before it and its content. */
  readonly continued?: { readonly context: string; readonly prefix: string };
  readonly tokens: number;
  readonly media: MediaItem[];
  readonly textParts: number;
  readonly pieces: PromptPiece[];
}

function mediaMarker(item: MediaItem): string {
  return `<${item.modality}:${(item.uuid ? fnv1a(item.uuid) : fnv1a(item.source)).toString(16)}>`;
}

/**
 * The content of a final assistant message the engine continues instead of answering after it. vLLM renders it open
 * (chat template `continue_final_message`) and refuses the flag together with `add_generation_prompt` (its default
 * true); SGLang (`_handle_last_assistant_message`) takes a string content off the messages and appends it to the
 * rendered prompt, whatever `add_generation_prompt` says. See docs/engine-sim.md.
 */
function continuedContent(body: Record<string, unknown>, messages: unknown[], engine: EngineKind): string | undefined {
  if (optionalBool(body, 'continue_final_message') !== true) return undefined;
  if (engine === 'vllm' && (optionalBool(body, 'add_generation_prompt') ?? true)) {
    throw bad('Cannot set both `add_generation_prompt` and `continue_final_message` to True.');
  }
  const last = messages[messages.length - 1] as { role?: unknown; content?: unknown } | undefined;
  return last?.role === 'assistant' && typeof last.content === 'string' ? last.content : undefined;
}

function chatPrompt(body: Record<string, unknown>, engine: EngineKind): Prompt {
  const messages = body['messages'];
  if (messages === undefined) throw bad('messages: Field required', 'messages');
  if (!Array.isArray(messages)) throw bad('messages: Input should be a valid list', 'messages');
  if (messages.length === 0)
    throw bad(engine === 'sglang' ? 'Messages cannot be empty.' : 'messages: List should have at least 1 item', 'messages');
  const prefix = continuedContent(body, messages, engine);
  let context: string | undefined;
  let text = '';
  let tokens = CHAT_GENERATION_PROMPT_TOKENS;
  let textParts = 0;
  const media: MediaItem[] = [];
  const pieces: PromptPiece[] = [];
  const textPiece = (t: string) => {
    if (t.length > 0) pieces.push({ key: fnv1a(t), tokens: countTextTokens(t) });
  };
  for (const [i, m] of messages.entries()) {
    if (prefix !== undefined && i === messages.length - 1) context = text;
    if (!m || typeof m !== 'object' || typeof (m as { role?: unknown }).role !== 'string')
      throw bad(`messages.${i}.role: Field required`, 'messages');
    const { role, content } = m as { role: string; content?: unknown };
    text += `${role}:`;
    tokens += CHAT_MESSAGE_OVERHEAD_TOKENS;
    pieces.push({ key: fnv1a(`${role}:`), tokens: CHAT_MESSAGE_OVERHEAD_TOKENS });
    if (typeof content === 'string') {
      textPiece(content);
      text += content;
      tokens += countTextTokens(content);
      if (content.length > 0) textParts++;
    } else if (Array.isArray(content)) {
      for (const part of content) {
        if (!part || typeof part !== 'object')
          throw bad(`messages.${i}.content: Input should be a valid list of content parts`, 'messages');
        const item = mediaItemOf(part as Record<string, unknown>);
        if (item) {
          media.push(item);
          const marker = mediaMarker(item);
          text += marker;
          tokens += item.tokens ?? MEDIA_TOKENS[item.modality];
          pieces.push({ key: fnv1a(marker), tokens: item.tokens ?? MEDIA_TOKENS[item.modality], media: media.length - 1 });
        } else {
          const t = (part as { text: string }).text;
          textPiece(t);
          text += t;
          tokens += countTextTokens(t);
          if (t.length > 0) textParts++;
        }
      }
    } else if (content !== undefined && content !== null) {
      throw bad(`messages.${i}.content: Input should be a valid string or list`, 'messages');
    }
    text += '\n';
  }
  pieces.push({ key: 0x67656e, tokens: CHAT_GENERATION_PROMPT_TOKENS });
  if (prefix !== undefined && context !== undefined) return { text, tokens, media, textParts, pieces, continued: { context, prefix } };
  return { text, tokens, media, textParts, pieces };
}

function completionPrompt(body: Record<string, unknown>): Prompt {
  let prompt = body['prompt'];
  if (prompt === undefined) throw bad('prompt: Field required', 'prompt');
  if (Array.isArray(prompt) && prompt.length > 0 && (typeof prompt[0] === 'string' || Array.isArray(prompt[0]))) {
    if (prompt.length > 1) throw bad('batched prompts are not supported by the simulator (send one prompt per request)', 'prompt');
    prompt = prompt[0];
  }
  if (typeof prompt === 'string')
    return {
      text: prompt,
      tokens: countTextTokens(prompt) + 1,
      media: [],
      textParts: prompt.length > 0 ? 1 : 0,
      pieces: [{ key: fnv1a(prompt), tokens: countTextTokens(prompt) + 1 }],
    };
  if (Array.isArray(prompt) && prompt.every((t) => typeof t === 'number' && Number.isInteger(t))) {
    const text = prompt.join(',');
    return {
      text,
      tokens: Math.max(1, prompt.length),
      media: [],
      textParts: prompt.length > 0 ? 1 : 0,
      pieces: [{ key: fnv1a(text), tokens: Math.max(1, prompt.length) }],
    };
  }
  throw bad('prompt: Input should be a valid string or list of token ids', 'prompt');
}

function generatePrompt(body: Record<string, unknown>): Prompt {
  const { text, input_ids: ids } = body as { text?: unknown; input_ids?: unknown };
  const media: MediaItem[] = [];
  const images = body['image_data'];
  for (const src of images === undefined || images === null ? [] : Array.isArray(images) ? images : [images]) {
    if (typeof src !== 'string') throw bad('image_data: Input should be a valid string or list of strings');
    media.push({ partType: 'image_url', modality: 'IMAGE', source: src });
  }
  const mediaTokens = media.reduce((n, item) => n + MEDIA_TOKENS[item.modality], 0);
  const markers = media.map(mediaMarker).join('');
  const mediaPieces: PromptPiece[] = media.map((item, i) => ({
    key: fnv1a(mediaMarker(item)),
    tokens: MEDIA_TOKENS[item.modality],
    media: i,
  }));
  if (Array.isArray(text) || (Array.isArray(ids) && Array.isArray(ids[0]))) {
    throw bad('batched /generate requests are not supported by the simulator');
  }
  if (typeof text === 'string')
    return {
      text: markers + text,
      tokens: countTextTokens(text) + 1 + mediaTokens,
      media,
      textParts: text.length > 0 ? 1 : 0,
      pieces: [...mediaPieces, { key: fnv1a(text), tokens: countTextTokens(text) + 1 }],
    };
  if (Array.isArray(ids) && ids.every((t) => typeof t === 'number')) {
    const joined = ids.join(',');
    return {
      text: markers + joined,
      tokens: Math.max(1, ids.length) + mediaTokens,
      media,
      textParts: 1,
      pieces: [...mediaPieces, { key: fnv1a(joined), tokens: Math.max(1, ids.length) }],
    };
  }
  throw bad('Either text, input_ids or input_embeds should be provided.');
}

/** Validates a chat, completion or SGLang `/generate` body; throws the engine's 400 on a bad body. */
export function parseInferenceRequest(kind: RequestKind, parsed: ParsedBody, engine: EngineKind): InferenceRequest {
  const body = asObject(parsed);
  if (body['model'] !== undefined && body['model'] !== null && typeof body['model'] !== 'string')
    throw bad('model: Input should be a valid string', 'model');
  const prompt = kind === 'chat' ? chatPrompt(body, engine) : kind === 'completion' ? completionPrompt(body) : generatePrompt(body);
  const n = optionalInt(body, 'n', 1);
  if (n !== undefined && n !== 1) throw bad('n > 1 is not supported by the simulator', 'n');
  const seed = optionalInt(body, 'seed', Number.MIN_SAFE_INTEGER) ?? 0;
  const sampling = kind === 'generate' ? samplingParams(body) : body;
  const maxTokens =
    kind === 'generate'
      ? (optionalInt(sampling, 'max_new_tokens', 0) ?? 128)
      : (optionalInt(body, 'max_completion_tokens', 1) ?? optionalInt(body, 'max_tokens', 1) ?? (kind === 'completion' ? 16 : undefined));
  const minTokens = optionalInt(sampling, kind === 'generate' ? 'min_new_tokens' : 'min_tokens', 0);
  // vLLM SamplingParams._verify_args (vllm/sampling_params.py): a prefill leg cut to max_tokens 1 that keeps the
  // client's min_tokens is refused, so routers must drop it there (vLLM's NIXL toy proxy does).
  if (engine === 'vllm' && minTokens !== undefined && maxTokens !== undefined && minTokens > maxTokens) {
    throw bad(`min_tokens must be less than or equal to max_tokens=${maxTokens}, got ${minTokens}.`, 'min_tokens');
  }
  const stream = optionalBool(body, 'stream') ?? false;
  const usage = streamUsage(body, stream, engine);
  const seedBasis = (0x811c9dc5 ^ seed) >>> 0;
  const start: OutputStart =
    prompt.continued !== undefined
      ? chatStart(prompt.continued.context, prompt.continued.prefix, seedBasis)
      : kind === 'completion' && typeof body['prompt'] === 'string'
        ? completionStart(prompt.text, seedBasis)
        : { key: fnv1a(prompt.text, seedBasis), offset: 0 };
  return {
    kind,
    body,
    model: body['model'] as string | undefined,
    promptText: prompt.text,
    promptTokens: prompt.tokens,
    media: prompt.media,
    textParts: prompt.textParts,
    maxTokens,
    minTokens,
    ignoreEos: optionalBool(sampling, 'ignore_eos') ?? false,
    stream,
    ...usage,
    outputKey: start.key,
    outputOffset: start.offset,
    pieces: prompt.pieces,
  };
}

function samplingParams(body: Record<string, unknown>): Record<string, unknown> {
  const sp = body['sampling_params'];
  if (sp === undefined || sp === null) return {};
  if (typeof sp !== 'object' || Array.isArray(sp)) throw bad('sampling_params: Input should be a valid dictionary');
  return sp as Record<string, unknown>;
}

/** vLLM defaults `include_usage` to true once `stream_options` is present; SGLang defaults it to false. */
function streamUsage(
  body: Record<string, unknown>,
  stream: boolean,
  engine: EngineKind,
): { includeUsage: boolean; continuousUsage: boolean } {
  const so = body['stream_options'];
  if (so === undefined || so === null) return { includeUsage: false, continuousUsage: false };
  if (typeof so !== 'object' || Array.isArray(so)) throw bad('stream_options: Input should be a valid dictionary', 'stream_options');
  if (engine === 'vllm' && !stream) throw bad('Stream options can only be defined when `stream=True`.', 'stream_options');
  const opts = so as Record<string, unknown>;
  const includeUsage = optionalBool(opts, 'include_usage') ?? engine === 'vllm';
  const continuous = optionalBool(opts, 'continuous_usage_stats') ?? false;
  return { includeUsage, continuousUsage: engine === 'vllm' ? includeUsage && continuous : continuous };
}
