import type { InferenceEngine } from '@triad/crd';
import { VllmBlockHasher, loadTokenizer, promptTokenIds, sglangBlockKeys, type ModelTokenizer } from '@triad/kv-events';
import type { KvHashOptions } from '@triad/scheduling';

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
 * Requests it cannot reproduce exactly (media parts, prompt embeddings, no tokenizer for the model) get no keys,
 * and the scorer then uses its approximate fallback.
 */
export class KvBlockHashing {
  readonly #logger: KvHashLogger;
  readonly #tokenizers = new Map<string, ModelTokenizer | null>();
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
    if (!o) return undefined;
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

  #tokens(t: ModelTokenizer, body: Record<string, unknown>): number[] | undefined {
    try {
      return promptTokenIds(t, body);
    } catch (err) {
      this.#logger.warn({ error: (err as Error).message }, 'chat template failed; request scored without KV block keys');
      return undefined;
    }
  }

  #tokenizer(path: string): ModelTokenizer | null {
    if (this.#tokenizers.has(path)) return this.#tokenizers.get(path) as ModelTokenizer | null;
    let loaded: ModelTokenizer | null = null;
    try {
      loaded = loadTokenizer(path);
    } catch (err) {
      this.#logger.warn(
        { tokenizer: path, error: (err as Error).message },
        'tokenizer unavailable; precise prefix routing falls back for its model',
      );
    }
    this.#tokenizers.set(path, loaded);
    return loaded;
  }
}
