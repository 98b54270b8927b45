import type { PromptPiece } from '../../openai/inference-request';

/** Where a prompt's media placeholders start, by media index. */
export interface PromptLayout {
  /** Chained hashes of the prompt's full blocks. */
  readonly blockHashes: number[];
  /** Token offset of each media item's placeholders (index = position in `request.media`). */
  readonly mediaStarts: number[];
}

/** A 32-bit integer mixer (murmur3-style finaliser) for the sim's block hashes and pool keys. */
export function mix32(x: number): number {
  x = Math.imul(x ^ (x >>> 16), 0x7feb352d);
  x = Math.imul(x ^ (x >>> 15), 0x846ca68b);
  return (x ^ (x >>> 16)) >>> 0;
}

/**
 * Block hashes over the prompt's pieces, as vLLM chains `hash_block_tokens` (parent hash + the block's tokens +
 * extra keys such as an item's identifier): block i's hash depends on every piece (key and offset) up to its end,
 * so two prompts share block i exactly when they share the first (i+1)·blockSize tokens. A partial last block has
 * no hash (vLLM caches full blocks only).
 */
export function promptLayout(pieces: readonly PromptPiece[], blockSize: number): PromptLayout {
  const blockHashes: number[] = [];
  const mediaStarts: number[] = [];
  let h1 = 0x12345678;
  let h2 = 0x9abcdef0;
  let inBlock = 0;
  let at = 0;
  for (const p of pieces) {
    if (p.media !== undefined) mediaStarts[p.media] = at;
    let off = 0;
    while (off < p.tokens) {
      const take = Math.min(p.tokens - off, blockSize - inBlock);
      h1 = mix32(h1 ^ mix32(p.key + Math.imul(off, 0x9e3779b1)));
      h2 = mix32(h2 ^ mix32(Math.imul(p.key, 0x85ebca6b) ^ (off + take)));
      off += take;
      inBlock += take;
      if (inBlock === blockSize) {
        blockHashes.push((h1 & 0x1fffff) * 4294967296 + h2);
        inBlock = 0;
      }
    }
    at += p.tokens;
  }
  return { blockHashes, mediaStarts };
}
