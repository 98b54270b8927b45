import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type * as HfTokenizers from '@huggingface/tokenizers';
import type * as HfJinja from '@huggingface/jinja';
import type { InferenceEngine } from '@triad/crd';
import { VllmBlockHasher, sglangBlockKeys } from '@triad/kv-events';
import type { KvHashOptions } from '@triad/scheduling';

interface LoadedTokenizer {
  encode(text: string, addSpecialTokens: boolean): number[];
  /** Renders chat messages with the model's template (add_generation_prompt), or undefined without one. */
  renderChat: ((messages: unknown[]) => string) | undefined;
}

export interface KvHashLogger {
  warn(obj: object, msg?: string): void;
}

/**
 * Computes `SchedulingRequest.kvBlockHashes` in the gateway: the prompt is tokenized with the model's own
 * tokenizer (a `tokenizer.json` shipped or mounted, never downloaded) — a completion's `prompt` string with the
 * tokenizer's special tokens, chat messages rendered with the model's chat template (`add_generation_prompt`,
 * no extra special tokens, as vLLM's chat endpoint does) — and hashed into block keys as the ModelServer's engines
 * do. Tokenizing lives here rather than in the scheduler because the prompt never crosses NATS (only scheduling
 * inputs do) and gateways scale with the request rate; the keys are 16 bytes per block on the wire.
 * Requests it cannot reproduce exactly (media parts, token-id prompts, no tokenizer for the model) get no keys,
 * and the scorer then uses its approximate fallback.
 */
export class KvBlockHashing {
  readonly #logger: KvHashLogger;
  readonly #tokenizers = new Map<string, LoadedTokenizer | null>();
  #hashers = new Map<string, VllmBlockHasher>();
  #options: KvHashOptions | undefined;

  constructor(logger: KvHashLogger) {
    this.#logger = logger;
  }

  /** Switches to the hashing of a new scheduler config (undefined: no precise scorer, nothing computed). */
  configure(options: KvHashOptions | undefined): void {
    this.#options = options;
    this.#hashers = new Map();
  }

  /** Block keys for this request, or undefined when they are not needed or cannot be computed exactly. */
  keys(engine: InferenceEngine, model: string, body: Record<string, unknown>, lora: string | undefined): string[] | undefined {
    const o = this.#options;
    if (!o || body['prompt_embeds'] !== undefined) return undefined;
    const ref = o.tokenizers.find((t) => t.model === model) ?? o.tokenizers.find((t) => t.model === '*');
    if (!ref) return undefined;
    const tokenizer = this.#tokenizer(ref.path);
    if (!tokenizer) return undefined;
    const tokens = this.#tokens(tokenizer, body);
    if (!tokens) return undefined;
    const max = o.maxBlocksToMatch;
    if (engine === 'SGLang') return lora ? undefined : sglangBlockKeys(tokens, o.blockSize, max);
    const key = `${o.hashAlgo}\u0000${o.hashSeed}\u0000${o.blockSize}`;
    let hasher = this.#hashers.get(key);
    if (!hasher) this.#hashers.set(key, (hasher = new VllmBlockHasher({ algo: o.hashAlgo, seed: o.hashSeed, blockSize: o.blockSize })));
    const salt = typeof body['cache_salt'] === 'string' ? body['cache_salt'] : undefined;
    return hasher.keys(tokens, { ...(lora ? { loraName: lora } : {}), ...(salt ? { cacheSalt: salt } : {}) }, max);
  }

  #tokens(t: LoadedTokenizer, body: Record<string, unknown>): number[] | undefined {
    const prompt = body['prompt'];
    if (typeof prompt === 'string') return t.encode(prompt, true);
    const messages = body['messages'];
    if (!Array.isArray(messages) || !t.renderChat) return undefined;
    for (const m of messages) {
      const content = (m as { content?: unknown } | null)?.content;
      // Media placeholders expand to a processor-dependent number of tokens: not reproducible here.
      if (Array.isArray(content) && content.some((p) => (p as { type?: unknown } | null)?.type !== 'text')) return undefined;
    }
    try {
      return t.encode(t.renderChat(messages), false);
    } catch (err) {
      this.#logger.warn({ error: (err as Error).message }, 'chat template failed; request scored without KV block keys');
      return undefined;
    }
  }

  #tokenizer(path: string): LoadedTokenizer | null {
    if (this.#tokenizers.has(path)) return this.#tokenizers.get(path) as LoadedTokenizer | null;
    let loaded: LoadedTokenizer | null = null;
    try {
      loaded = loadTokenizer(path);
    } catch (err) {
      this.#logger.warn({ tokenizer: path, error: (err as Error).message }, 'tokenizer unavailable; precise prefix routing falls back for its model');
    }
    this.#tokenizers.set(path, loaded);
    return loaded;
  }
}

/** Loads `tokenizer.json` (a file, or a directory holding it) and, beside it, `tokenizer_config.json`. */
export function loadTokenizer(path: string): LoadedTokenizer {
  const file = existsSync(path) && statSync(path).isDirectory() ? join(path, 'tokenizer.json') : path;
  const { Tokenizer } = require('@huggingface/tokenizers') as typeof HfTokenizers;
  const cfgFile = join(dirname(file), 'tokenizer_config.json');
  const cfg = existsSync(cfgFile) ? (JSON.parse(readFileSync(cfgFile, 'utf8')) as Record<string, unknown>) : {};
  const tokenizer = new Tokenizer(JSON.parse(readFileSync(file, 'utf8')) as object, cfg);
  const template = typeof cfg['chat_template'] === 'string' ? cfg['chat_template'] : undefined;
  let renderChat: LoadedTokenizer['renderChat'];
  if (template) {
    const { Template } = require('@huggingface/jinja') as typeof HfJinja;
    const compiled = new Template(template);
    const special = (name: string): string => {
      const v = cfg[name];
      return typeof v === 'string' ? v : typeof (v as { content?: unknown } | null)?.content === 'string' ? (v as { content: string }).content : '';
    };
    renderChat = (messages) => compiled.render({ messages, add_generation_prompt: true, bos_token: special('bos_token'), eos_token: special('eos_token') });
  }
  return { encode: (text, add) => tokenizer.encode(text, { add_special_tokens: add }).ids, renderChat };
}
