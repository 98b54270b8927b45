import {
  VllmBlockHasher,
  keyOfBytes,
  loadTokenizer,
  sglangBlockDigests,
  tokenizePrompt,
  type ModelTokenizer,
  type PromptTokens,
  type ChatMediaPart,
  type VllmExtraKeySource,
} from '@triad/kv-events';
import { mediaKey } from '../openai/media';
import type { CachedPrompt } from '../engine/prefix-cache';
import type { EngineKind, KvEventsSimOptions, KvGroupSimOptions } from '../options';

/** One full block of a prompt: Triad's block key, the hash as the engine puts it on the wire, its tokens. */
export interface PromptBlock {
  readonly key: string;
  readonly wire: Uint8Array | bigint;
  readonly tokens: readonly number[];
}

/** A KV-cache group's blocks of one prompt (one group unless the sim plays a hybrid model). */
export interface GroupBlocks {
  readonly idx: number;
  readonly spec: KvGroupSimOptions;
  readonly blocks: readonly PromptBlock[];
}

export interface HashedPrompt {
  readonly groups: readonly GroupBlocks[];
  /** Token count of the prompt as tokenized (the cached share is scaled from it to the simulator's own count). */
  readonly tokenCount: number;
}

/**
 * The simulated engine's identifier of an image sent without a `uuid`: its encoder-cache key (a SHA-256 of the URL
 * or data), standing for vLLM's BLAKE3 of the decoded pixels (`MultiModalHasher`). One name per image for the
 * encoder cache, the block hashes' extra keys and the render endpoint's `mm_hashes`, as in vLLM.
 */
function engineImageHash(part: ChatMediaPart): string {
  return mediaKey({ partType: 'image_url', modality: 'IMAGE', source: part.url });
}

/** The prompt part of a request body that decides its tokens (what references are matched on). */
function promptOf(body: Record<string, unknown>): string | undefined {
  if (Array.isArray(body['messages'])) return JSON.stringify(body['messages']);
  if (typeof body['prompt'] === 'string') return JSON.stringify(body['prompt']);
  return undefined;
}

/**
 * Tokenizes prompts and hashes their full blocks as the simulated engine does: vLLM's chained block hash (its
 * `--prefix-caching-hash-algo`, PYTHONHASHSEED, LoRA name, multimodal item and `cache_salt` extra keys; bytes on the
 * wire), chained at `blockSize` and, for a hybrid model (`groups`), named per group by the last hash inside each of
 * the group's blocks (vLLM's `BlockHashListWithBlockSize`); or SGLang's page digests (SHA-256 chain, first 8 bytes as
 * a signed int64 on the wire). A prompt listed in `references` gets the reference's token ids and multimodal items
 * (a test gives the ids an upstream reference computed); other prompts go through the model's tokenizer, and what it
 * cannot reproduce is tokenized from the simulator's prompt text (cached and published, not matchable by a router).
 */
export class SimBlockHashing {
  readonly blockSize: number;
  readonly #engine: EngineKind;
  readonly #tokenizer: ModelTokenizer;
  readonly #vllm: VllmBlockHasher | undefined;
  readonly #servedModel: string;
  readonly #groups: readonly KvGroupSimOptions[];
  readonly #references = new Map<string, PromptTokens>();
  /** A simulated hybrid model: several groups, or one whose blocks are larger than the chain's. */
  readonly hybrid: boolean;

  constructor(engine: EngineKind, options: KvEventsSimOptions, servedModel: string) {
    this.#engine = engine;
    this.blockSize = options.blockSize ?? 16;
    this.#tokenizer = loadTokenizer(options.tokenizer, options.tokenizerConfig ? { configDir: options.tokenizerConfig } : {});
    this.#servedModel = servedModel;
    this.#groups = engine === 'vllm' && options.groups ? options.groups : [{ blockSize: this.blockSize }];
    for (const g of this.#groups) {
      if (g.blockSize % this.blockSize !== 0)
        throw new Error(`kvEvents group block size ${g.blockSize} is not a multiple of ${this.blockSize}`);
    }
    this.hybrid = options.groups !== undefined;
    for (const r of options.references ?? []) {
      const key = promptOf(r);
      if (key !== undefined) this.#references.set(key, { ids: r.ids, mm: r.mm ?? [] });
    }
    this.#vllm =
      engine === 'vllm'
        ? new VllmBlockHasher({ algo: options.hashAlgo ?? 'sha256', seed: options.hashSeed ?? '0', blockSize: this.blockSize })
        : undefined;
  }

  /**
   * The prompt's token ids as this engine's /tokenize and render endpoints answer: a reference's, else the
   * tokenizer's, images expanded by the model's processor (Qwen2-VL family, sizes from `data:` URL headers) and
   * named as the engine names them: the part's `uuid`, else the engine's own hash of the image
   * ({@link engineImageHash}). Throws (UnsupportedChatError) for what the tokenizer cannot reproduce.
   */
  tokenize(body: Record<string, unknown>): PromptTokens {
    const key = promptOf(body);
    const ref = key === undefined ? undefined : this.#references.get(key);
    return ref ?? tokenizePrompt(this.#tokenizer, body, { imageHash: engineImageHash });
  }

  hash(prompt: CachedPrompt): HashedPrompt {
    const { ids, mm } = this.#tokens(prompt);
    if (this.#vllm) {
      const fine = this.#vllm.digests(ids, { ...this.#extraKeys(prompt), ...(mm.length > 0 ? { mm } : {}) });
      const groups = this.#groups.map((spec, idx) => {
        const scale = spec.blockSize / this.blockSize;
        const blocks: PromptBlock[] = [];
        for (let j = 0; (j + 1) * scale <= fine.length; j++) {
          const d = fine[(j + 1) * scale - 1];
          blocks.push({ key: keyOfBytes(d), wire: d, tokens: ids.slice(j * spec.blockSize, (j + 1) * spec.blockSize) });
        }
        return { idx, spec, blocks };
      });
      return { tokenCount: ids.length, groups };
    }
    const size = this.blockSize;
    const blocks = sglangBlockDigests(ids, size).map((d, i) => {
      const head = Buffer.from(d.buffer, d.byteOffset, 8);
      return { key: head.toString('hex'), wire: head.readBigInt64BE(0), tokens: ids.slice(i * size, (i + 1) * size) };
    });
    return { tokenCount: ids.length, groups: [{ idx: 0, spec: { blockSize: size }, blocks }] };
  }

  #tokens(prompt: CachedPrompt): PromptTokens {
    const body = prompt.body;
    try {
      if (prompt.kind === 'generate') {
        const ids = body['input_ids'];
        if (Array.isArray(ids) && ids.every((t) => Number.isInteger(t))) return { ids: ids as number[], mm: [] };
        if (typeof body['text'] === 'string' && body['image_data'] === undefined)
          return { ids: this.#tokenizer.encode(body['text'], true), mm: [] };
      } else {
        return this.tokenize(body);
      }
    } catch {
      // A prompt the tokenizer cannot reproduce (or a template that fails on it): the stand-in text below.
    }
    return { ids: this.#tokenizer.encode(prompt.promptText, true), mm: [] };
  }

  /** vLLM: the adapter's name when the request names a LoRA adapter, and `cache_salt`. */
  #extraKeys(prompt: CachedPrompt): VllmExtraKeySource {
    const lora = prompt.model !== undefined && prompt.model !== this.#servedModel ? prompt.model : undefined;
    const salt = this.#engine === 'vllm' && typeof prompt.body['cache_salt'] === 'string' ? prompt.body['cache_salt'] : undefined;
    return { ...(lora ? { loraName: lora } : {}), ...(salt ? { cacheSalt: salt } : {}) };
  }
}
