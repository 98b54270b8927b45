import {
  VllmBlockHasher,
  keyOfBytes,
  loadTokenizer,
  promptTokenIds,
  sglangBlockDigests,
  type ModelTokenizer,
  type VllmExtraKeySource,
} from '@triad/kv-events';
import type { CachedPrompt } from '../engine/prefix-cache';
import type { EngineKind, KvEventsSimOptions } from '../options';

/** One full block of a prompt: Triad's block key, the hash as the engine puts it on the wire, its tokens. */
export interface PromptBlock {
  readonly key: string;
  readonly wire: Uint8Array | bigint;
  readonly tokens: readonly number[];
}

export interface HashedPrompt {
  readonly blocks: readonly PromptBlock[];
  /** Token count of the prompt as tokenized (the cached share is scaled from it to the simulator's own count). */
  readonly tokenCount: number;
}

/**
 * Tokenizes prompts with the model's tokenizer and hashes their full blocks as the simulated engine does: vLLM's
 * chained block hash (its `--prefix-caching-hash-algo`, PYTHONHASHSEED, LoRA name and `cache_salt` extra keys;
 * bytes on the wire), or SGLang's page digests (SHA-256 chain, first 8 bytes as a signed int64 on the wire).
 * Prompts the tokenizer alone cannot reproduce (media parts, chat without a template) are tokenized from the
 * simulator's prompt text instead, so they are still cached and published, just not matchable by a router.
 */
export class SimBlockHashing {
  readonly blockSize: number;
  readonly #engine: EngineKind;
  readonly #tokenizer: ModelTokenizer;
  readonly #vllm: VllmBlockHasher | undefined;
  readonly #servedModel: string;

  constructor(engine: EngineKind, options: KvEventsSimOptions, servedModel: string) {
    this.#engine = engine;
    this.blockSize = options.blockSize ?? 16;
    this.#tokenizer = loadTokenizer(options.tokenizer);
    this.#servedModel = servedModel;
    this.#vllm =
      engine === 'vllm'
        ? new VllmBlockHasher({ algo: options.hashAlgo ?? 'sha256', seed: options.hashSeed ?? '0', blockSize: this.blockSize })
        : undefined;
  }

  hash(prompt: CachedPrompt): HashedPrompt {
    const tokens = this.#tokens(prompt);
    const size = this.blockSize;
    const slice = (i: number): number[] => tokens.slice(i * size, (i + 1) * size);
    if (this.#vllm) {
      const digests = this.#vllm.digests(tokens, this.#extraKeys(prompt));
      return { tokenCount: tokens.length, blocks: digests.map((d, i) => ({ key: keyOfBytes(d), wire: d, tokens: slice(i) })) };
    }
    const digests = sglangBlockDigests(tokens, size);
    return {
      tokenCount: tokens.length,
      blocks: digests.map((d, i) => {
        const wire = Buffer.from(d.buffer, d.byteOffset, 8).readBigInt64BE(0);
        return { key: Buffer.from(d.buffer, d.byteOffset, 8).toString('hex'), wire, tokens: slice(i) };
      }),
    };
  }

  #tokens(prompt: CachedPrompt): number[] {
    const body = prompt.body;
    try {
      if (prompt.kind === 'generate') {
        const ids = body['input_ids'];
        if (Array.isArray(ids) && ids.every((t) => Number.isInteger(t))) return ids as number[];
        if (typeof body['text'] === 'string' && body['image_data'] === undefined) return this.#tokenizer.encode(body['text'], true);
      } else {
        const ids = promptTokenIds(this.#tokenizer, body);
        if (ids) return ids;
      }
    } catch {
      // A chat template that fails on these messages: the stand-in text below.
    }
    return this.#tokenizer.encode(prompt.promptText, true);
  }

  /** vLLM: the adapter's name when the request names a LoRA adapter, and `cache_salt`. */
  #extraKeys(prompt: CachedPrompt): VllmExtraKeySource {
    const lora = prompt.model !== undefined && prompt.model !== this.#servedModel ? prompt.model : undefined;
    const salt = this.#engine === 'vllm' && typeof prompt.body['cache_salt'] === 'string' ? prompt.body['cache_salt'] : undefined;
    return { ...(lora ? { loraName: lora } : {}), ...(salt ? { cacheSalt: salt } : {}) };
  }
}
