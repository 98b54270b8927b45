import { createHash } from 'node:crypto';
import { xxh3 } from '@node-rs/xxhash';
import { keyOfBytes } from './block-key';
import { ByteWriter } from './byte-writer';
import { cborDumps } from './cbor';
import { pickleDumps } from './pickle';
import type { PyValue } from './py-value';

/** vLLM's `--prefix-caching-hash-algo` values this module reproduces (vllm/utils/hashing.py). */
export const VLLM_HASH_ALGOS = ['sha256', 'sha256_cbor', 'xxhash', 'xxhash_cbor'] as const;
export type VllmHashAlgo = (typeof VLLM_HASH_ALGOS)[number];

type HashFn = (value: PyValue) => Uint8Array;

function sha256(data: Uint8Array): Uint8Array {
  return createHash('sha256').update(data).digest();
}

/** xxhash.xxh3_128_digest: the 128-bit value, big-endian (xxHash's canonical form). */
function xxh3128(data: Uint8Array): Uint8Array {
  const v = xxh3.xxh128(Buffer.from(data.buffer, data.byteOffset, data.length));
  const out = new Uint8Array(16);
  new DataView(out.buffer).setBigUint64(0, v >> 64n);
  new DataView(out.buffer).setBigUint64(8, v & 0xffffffffffffffffn);
  return out;
}

/** The hash function behind each algorithm name: serializer (pickle protocol 5 or canonical CBOR) then digest. */
function hashFnOf(algo: VllmHashAlgo): HashFn {
  const w = new ByteWriter();
  switch (algo) {
    case 'sha256':
      return (v) => sha256(pickleDumps(v, w));
    case 'sha256_cbor':
      return (v) => sha256(cborDumps(v, w));
    case 'xxhash':
      return (v) => xxh3128(pickleDumps(v, w));
    case 'xxhash_cbor':
      return (v) => xxh3128(cborDumps(v, w));
  }
}

/** One multimodal item of a request as vLLM places it: its identifier (mm_hash or uuid) and token span. */
export interface VllmMmItem {
  readonly identifier: string;
  readonly offset: number;
  readonly length: number;
}

/** What besides the tokens goes into vLLM's block hashes (`generate_block_hash_extra_keys`). */
export interface VllmExtraKeySource {
  /** LoRA adapter name (`lora_request.lora_name`): part of every block's extra keys. */
  readonly loraName?: string;
  /** Request `cache_salt`: part of the first block's extra keys only. */
  readonly cacheSalt?: string;
  /** Multimodal items sorted by offset. */
  readonly mm?: readonly VllmMmItem[];
}

export interface VllmHasherOptions {
  readonly algo: VllmHashAlgo;
  /**
   * The engines' PYTHONHASHSEED. vLLM seeds every chain with `NONE_HASH = hash_fn(PYTHONHASHSEED)`; without the
   * variable it draws 32 random bytes per process, and no router can reproduce its hashes.
   */
  readonly seed: string;
  /** Tokens per block (vLLM `--block-size`, default 16). */
  readonly blockSize: number;
}

/**
 * vLLM's prefix-caching block hashes (vllm/v1/core/kv_cache_utils.py `hash_block_tokens` and
 * `get_request_block_hasher`): block i's hash is `hash_fn((parent, tuple(block_tokens), extra_keys))` with parent
 * = block i-1's hash, or NONE_HASH for block 0; only full blocks are hashed.
 */
export class VllmBlockHasher {
  readonly options: VllmHasherOptions;
  readonly #hash: HashFn;
  readonly noneHash: Uint8Array;

  constructor(options: VllmHasherOptions) {
    if (!(options.blockSize >= 1)) throw new RangeError('blockSize must be >= 1');
    this.options = options;
    this.#hash = hashFnOf(options.algo);
    this.noneHash = this.#hash(options.seed);
  }

  /** Hash of one block given its parent's hash (undefined for the first block). */
  blockHash(parent: Uint8Array | undefined, tokens: readonly number[], extraKeys: readonly PyValue[] | null = null): Uint8Array {
    return this.#hash([parent ?? this.noneHash, tokens, extraKeys]);
  }

  /** Digests of the full blocks of `tokens` (at most `maxBlocks`). */
  digests(tokens: readonly number[], extra: VllmExtraKeySource = {}, maxBlocks = Infinity): Uint8Array[] {
    const size = this.options.blockSize;
    const n = Math.min(Math.floor(tokens.length / size), maxBlocks);
    const out: Uint8Array[] = [];
    let parent: Uint8Array | undefined;
    const cursor = { mm: 0 };
    for (let b = 0; b < n; b++) {
      const start = b * size;
      const keys = extraKeys(extra, start, start + size, cursor);
      parent = this.blockHash(parent, tokens.slice(start, start + size), keys);
      out.push(parent);
    }
    return out;
  }

  /** Block keys (hex of each hash's last 8 bytes) of the full blocks of `tokens`. */
  keys(tokens: readonly number[], extra: VllmExtraKeySource = {}, maxBlocks = Infinity): string[] {
    return this.digests(tokens, extra, maxBlocks).map(keyOfBytes);
  }
}

/**
 * Extra keys of the block [start, end): LoRA name, then `(identifier, offset - start)` for each multimodal item
 * overlapping the block, then the cache salt on block 0 (the order vLLM concatenates them). `cursor.mm` carries the
 * first item that may still overlap later blocks. None (null) when there are none.
 */
export function extraKeys(src: VllmExtraKeySource, start: number, end: number, cursor: { mm: number }): PyValue[] | null {
  const keys: PyValue[] = [];
  if (src.loraName !== undefined) keys.push(src.loraName);
  const mm = src.mm ?? [];
  while (cursor.mm < mm.length) {
    const item = mm[cursor.mm];
    if (end <= item.offset) break;
    if (start >= item.offset + item.length) {
      cursor.mm++;
      continue;
    }
    keys.push([item.identifier, item.offset - start]);
    if (end >= item.offset + item.length) cursor.mm++;
    else break;
  }
  if (start === 0 && src.cacheSalt) keys.push(src.cacheSalt);
  return keys.length === 0 ? null : keys;
}
