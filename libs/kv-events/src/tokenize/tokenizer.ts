import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type * as HfTokenizers from '@huggingface/tokenizers';
import type { VllmMmItem } from '../hashing/vllm-block-hash';
import { UnsupportedChatError, type ChatMediaPart } from './chat-messages';
import { ChatTemplates } from './chat-templates';
import { expandImages, imageRuleOf, type ImagePlaceholderRule } from './image-placeholders';
import { renderChat, type RenderedChat } from './render-chat';

/** A model's tokenizer as the engines use it for prefix caching: text → token ids, chat → prompt text. */
export interface ModelTokenizer {
  encode(text: string, addSpecialTokens: boolean): number[];
  /** The id of a token (special tokens included), if the vocabulary has it. */
  tokenId(token: string): number | undefined;
  /** Renders a chat body as vLLM does; undefined when the model has no chat template. */
  readonly renderChat: ((body: Record<string, unknown>) => RenderedChat) | undefined;
  /** How the model's processor expands an image, when Triad knows it. */
  readonly imageRule: ImagePlaceholderRule | undefined;
}

export interface LoadTokenizerOptions {
  /** Where `tokenizer_config.json`, `chat_template.jinja`, `chat_template.json` and `preprocessor_config.json` live (default: beside tokenizer.json). */
  readonly configDir?: string;
}

const SPECIAL_TOKEN_NAMES = ['bos_token', 'eos_token', 'unk_token', 'sep_token', 'pad_token', 'cls_token', 'mask_token'];

/** transformers' `special_tokens_map`: the named special tokens that are set, and `additional_special_tokens`. */
function specialTokensOf(cfg: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const name of SPECIAL_TOKEN_NAMES) {
    const v = cfg[name];
    const text = typeof v === 'string' ? v : (v as { content?: unknown } | null)?.content;
    if (typeof text === 'string') out[name] = text;
  }
  const extra = cfg['additional_special_tokens'];
  if (Array.isArray(extra) && extra.length > 0) out['additional_special_tokens'] = extra;
  return out;
}

/**
 * Loads `tokenizer.json` (a file, or a directory holding it) and the model's config beside it (or in `configDir`):
 * `tokenizer_config.json` (special tokens, chat templates), `chat_template.jinja`, `chat_template.json`,
 * `preprocessor_config.json`. Never downloads anything: the files are shipped with the image or mounted.
 */
export function loadTokenizer(path: string, options: LoadTokenizerOptions = {}): ModelTokenizer {
  const file = existsSync(path) && statSync(path).isDirectory() ? join(path, 'tokenizer.json') : path;
  const dir = options.configDir ?? dirname(file);
  const { Tokenizer } = require('@huggingface/tokenizers') as typeof HfTokenizers;
  const cfgFile = join(dir, 'tokenizer_config.json');
  const cfg = existsSync(cfgFile) ? (JSON.parse(readFileSync(cfgFile, 'utf8')) as Record<string, unknown>) : {};
  const tokenizer = new Tokenizer(JSON.parse(readFileSync(file, 'utf8')) as object, cfg);
  const templates = ChatTemplates.fromDirectory(dir, cfg);
  const special = specialTokensOf(cfg);
  return {
    encode: (text, add) => tokenizer.encode(text, { add_special_tokens: add }).ids,
    tokenId: (token) => tokenizer.token_to_id(token) ?? undefined,
    renderChat: templates.empty ? undefined : (body) => renderChat(templates, special, body),
    imageRule: imageRuleOf(dir),
  };
}

/** A prompt as the engine's scheduler sees it: token ids, and the multimodal items placed in them. */
export interface PromptTokens {
  readonly ids: number[];
  readonly mm: VllmMmItem[];
}

interface TokenizePromptOptions {
  /**
   * The engine's own identifier of an image sent without a `uuid` (vLLM hashes the decoded pixels). Only an engine
   * (or a simulated one) can give it; without it such an image throws {@link UnsupportedChatError}.
   */
  readonly imageHash?: (part: ChatMediaPart) => string;
}

/**
 * The token ids (and multimodal items) an engine computes for an OpenAI request body, as vLLM's serving layer does:
 * a completion's `prompt` string with the tokenizer's special tokens (`add_special_tokens`, default true), a list of
 * token ids as it is; chat `messages` rendered as vLLM renders them and encoded with `add_special_tokens` (default
 * false), images expanded by the model's processor rule. Throws {@link UnsupportedChatError} when the ids depend on
 * more than Triad reproduces (prompt embeddings, media without a uuid or a known processor, a failing template).
 */
export function tokenizePrompt(t: ModelTokenizer, body: Record<string, unknown>, options: TokenizePromptOptions = {}): PromptTokens {
  if (body['prompt_embeds'] !== undefined) throw new UnsupportedChatError('prompt embeddings');
  let prompt = body['prompt'];
  if (Array.isArray(prompt) && prompt.length === 1 && (typeof prompt[0] === 'string' || Array.isArray(prompt[0]))) prompt = prompt[0];
  if (typeof prompt === 'string') return { ids: t.encode(prompt, body['add_special_tokens'] !== false), mm: [] };
  if (Array.isArray(prompt)) {
    if (prompt.length > 0 && prompt.every((x) => Number.isInteger(x))) return { ids: prompt as number[], mm: [] };
    throw new UnsupportedChatError('prompt is neither text nor token ids');
  }
  if (!Array.isArray(body['messages'])) throw new UnsupportedChatError('neither prompt nor messages');
  if (!t.renderChat) throw new UnsupportedChatError('the model has no chat template');
  const { text, media } = t.renderChat(body);
  const ids = t.encode(text, body['add_special_tokens'] === true);
  if (media.length === 0) return { ids, mm: [] };
  const rule = t.imageRule;
  if (!rule) throw new UnsupportedChatError('images for a model whose processor Triad does not reproduce');
  const padId = t.tokenId(rule.padToken);
  if (padId === undefined) throw new UnsupportedChatError(`the vocabulary has no ${rule.padToken}`);
  return expandImages(ids, media, rule, padId, options.imageHash);
}

/** The token ids of a text-only request, or undefined when {@link tokenizePrompt} cannot reproduce them. */
export function promptTokenIds(t: ModelTokenizer, body: Record<string, unknown>): number[] | undefined {
  try {
    const p = tokenizePrompt(t, body);
    return p.mm.length === 0 ? p.ids : undefined;
  } catch (err) {
    if (err instanceof UnsupportedChatError) return undefined;
    throw err;
  }
}
