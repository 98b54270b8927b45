import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { z } from 'zod';
import type * as TiktokenLite from 'js-tiktoken/lite';
import type * as HfTokenizers from '@huggingface/tokenizers';
import type { TokenizerConfigSchema } from '../config/admission-config';
import { matchesPattern } from '../identity';
import type { AdmissionLogger } from '../logger';

export type TokenizerConfig = z.infer<typeof TokenizerConfigSchema>;

/** How an estimate was made; the `method` label of `triad_admission_input_token_estimates_total`. */
export type EstimateMethod = 'tiktoken_cl100k_base' | 'tiktoken_o200k_base' | 'hf_tokenizer' | 'chars_div_4';

export interface TokenEstimate {
  readonly tokens: number;
  readonly method: EstimateMethod;
}

type Encoder = (text: string) => number;
interface Resolved {
  readonly method: EstimateMethod;
  readonly encode: Encoder;
}

const CHARS_DIV_4: Resolved = { method: 'chars_div_4', encode: (text) => Math.ceil(text.length / 4) };

/** OpenAI model families by encoding (js-tiktoken's own table covers exact names; these catch dated variants). */
const O200K = /^(gpt-4o|gpt-4\.1|gpt-4\.5|gpt-5|o1|o3|o4|chatgpt-4o|gpt-oss)/;
const CL100K = /^(gpt-4|gpt-3\.5|gpt-35|text-embedding-3|text-embedding-ada-002)/;

/** The tiktoken encoding for an OpenAI-family model name (a provider prefix like `openai/` is ignored). */
export function tiktokenEncodingFor(model: string): 'cl100k_base' | 'o200k_base' | undefined {
  const name = model.toLowerCase().slice(model.lastIndexOf('/') + 1);
  if (O200K.test(name)) return 'o200k_base';
  if (CL100K.test(name)) return 'cl100k_base';
  return undefined;
}

/**
 * Estimates input tokens with the best tokenizer available locally: a configured `tokenizer.json`
 * (@huggingface/tokenizers), else js-tiktoken for OpenAI-family names, else ceil(chars / 4) as Kthena does.
 * Tokenizers load lazily and are cached; call {@link warm} at startup to take the load time (about a second for
 * o200k) off the first request. Long texts are tokenized up to `maxChars` and extrapolated from that ratio.
 */
export class TokenEstimator {
  #config: TokenizerConfig;
  readonly #logger: AdmissionLogger;
  readonly #byModel = new Map<string, Resolved>();
  readonly #encoders = new Map<string, Encoder | null>();

  constructor(config: TokenizerConfig, logger: AdmissionLogger) {
    this.#config = config;
    this.#logger = logger;
  }

  update(config: TokenizerConfig): void {
    this.#config = config;
    this.#byModel.clear();
  }

  estimate(model: string, text: string): TokenEstimate {
    const resolved = this.#resolve(model);
    if (resolved === CHARS_DIV_4 || text.length <= this.#config.maxChars) return { tokens: resolved.encode(text), method: resolved.method };
    const head = resolved.encode(text.slice(0, this.#config.maxChars));
    return { tokens: Math.ceil((head * text.length) / this.#config.maxChars), method: resolved.method };
  }

  /** Which method `model` gets (loading its tokenizer if needed). */
  methodFor(model: string): EstimateMethod {
    return this.#resolve(model).method;
  }

  /** Loads the tokenizers of these models now. */
  warm(models: readonly string[]): void {
    for (const m of models) this.#resolve(m);
  }

  #resolve(model: string): Resolved {
    const hit = this.#byModel.get(model);
    if (hit) return hit;
    let resolved = CHARS_DIV_4;
    const local = this.#config.models.find((m) => matchesPattern(m.match, model));
    const encoding = this.#config.tiktoken ? tiktokenEncodingFor(model) : undefined;
    if (local) {
      const enc = this.#encoder(`hf:${local.path}`, () => loadHfTokenizer(local.path, local.configPath));
      if (enc) resolved = { method: 'hf_tokenizer', encode: enc };
    } else if (encoding) {
      const enc = this.#encoder(`tiktoken:${encoding}`, () => loadTiktoken(encoding));
      if (enc) resolved = { method: `tiktoken_${encoding}`, encode: enc };
    }
    this.#byModel.set(model, resolved);
    return resolved;
  }

  #encoder(key: string, load: () => Encoder): Encoder | null {
    if (this.#encoders.has(key)) return this.#encoders.get(key) as Encoder | null;
    let enc: Encoder | null = null;
    try {
      enc = load();
    } catch (err) {
      // A missing or unreadable tokenizer degrades to chars/4 rather than failing requests.
      this.#logger.warn({ tokenizer: key, error: (err as Error).message }, 'tokenizer unavailable; estimating chars/4');
    }
    this.#encoders.set(key, enc);
    return enc;
  }
}

function loadTiktoken(encoding: 'cl100k_base' | 'o200k_base'): Encoder {
  const { Tiktoken } = require('js-tiktoken/lite') as typeof TiktokenLite;
  const ranks = (encoding === 'o200k_base' ? require('js-tiktoken/ranks/o200k_base') : require('js-tiktoken/ranks/cl100k_base')) as {
    default?: unknown;
  };
  const enc = new Tiktoken((ranks.default ?? ranks) as ConstructorParameters<typeof Tiktoken>[0]);
  // Special-token text in a prompt is counted as ordinary text: it is what the engine will see as input.
  return (text) => enc.encode(text, [], []).length;
}

function loadHfTokenizer(path: string, configPath: string | undefined): Encoder {
  const { Tokenizer } = require('@huggingface/tokenizers') as typeof HfTokenizers;
  const json = JSON.parse(readFileSync(path, 'utf8')) as object;
  const sibling = join(dirname(path), 'tokenizer_config.json');
  const cfgFile = configPath ?? (existsSync(sibling) ? sibling : undefined);
  const cfg = cfgFile ? (JSON.parse(readFileSync(cfgFile, 'utf8')) as object) : {};
  const tokenizer = new Tokenizer(json, cfg);
  return (text) => tokenizer.encode(text, { add_special_tokens: false }).ids.length;
}
