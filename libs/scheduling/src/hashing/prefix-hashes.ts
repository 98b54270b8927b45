import { xxh64 } from '@node-rs/xxhash';

export interface PrefixHashOptions {
  /** Characters per block (Kthena's `blockSizeToHash`, counted in UTF-16 code units of the prompt). Default 64. */
  readonly blockSize?: number;
  /** Most blocks hashed; longer prompts are truncated to that prefix (Kthena's `maxBlocksToMatch`). Default 128. */
  readonly maxBlocks?: number;
}

export const DEFAULT_PREFIX_BLOCK_SIZE = 64;
export const DEFAULT_PREFIX_MAX_BLOCKS = 128;

const toHex = (h: bigint): string => h.toString(16).padStart(16, '0');

/**
 * Kthena's chained prompt block hashes, as hex strings: `h0 = xxh64(model)`, `h_i = xxh64(decimal(h_{i-1}) ‖ block_i)`.
 * Block i's hash depends on every character before it, so two prompts share hash i exactly when they share the
 * first i+1 blocks. A trailing partial block is hashed too, so short prompts and exact repeats still match.
 * The gateway puts the result in `SchedulingRequest.prefixHashes`; the `prefix-cache` plugin matches on it.
 */
export function prefixBlockHashes(model: string, prompt: string, opts: PrefixHashOptions = {}): string[] {
  const blockSize = opts.blockSize ?? DEFAULT_PREFIX_BLOCK_SIZE;
  const maxBlocks = opts.maxBlocks ?? DEFAULT_PREFIX_MAX_BLOCKS;
  if (!(blockSize >= 1) || !(maxBlocks >= 0)) throw new RangeError('blockSize must be >= 1 and maxBlocks >= 0');
  const blocks = Math.min(Math.ceil(prompt.length / blockSize), maxBlocks);
  const out = new Array<string>(blocks);
  let prev = xxh64(model);
  for (let i = 0; i < blocks; i++) {
    const start = i * blockSize;
    prev = xxh64(prev.toString(10) + prompt.slice(start, start + blockSize));
    out[i] = toHex(prev);
  }
  return out;
}
