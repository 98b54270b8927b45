import { createHash } from 'node:crypto';
import { hex8 } from './block-key';

/**
 * SGLang's KV-event block hashes (python/sglang/srt/mem_cache: `get_hash_str`, `hash_str_to_int64`, and the
 * radix cache's `_record_store_event`): page i's digest is SHA-256 over page i-1's 32-byte digest (nothing for the
 * first page) followed by each token as a 4-byte little-endian unsigned integer; the event carries the digest's
 * first 8 bytes as a signed int64. Pages are `--page-size` tokens. Requests with a LoRA or cache-salt namespace
 * (RadixKey extra_key) are seeded differently by newer SGLang and are not reproduced here.
 */
export function sglangBlockDigests(tokens: readonly number[], pageSize: number, maxBlocks = Infinity): Uint8Array[] {
  if (!(pageSize >= 1)) throw new RangeError('pageSize must be >= 1');
  const n = Math.min(Math.floor(tokens.length / pageSize), maxBlocks);
  const out: Uint8Array[] = [];
  const page = Buffer.alloc(pageSize * 4);
  let prior: Uint8Array | undefined;
  for (let b = 0; b < n; b++) {
    for (let i = 0; i < pageSize; i++) page.writeUInt32LE(tokens[b * pageSize + i], i * 4);
    const h = createHash('sha256');
    if (prior) h.update(prior);
    prior = h.update(page).digest();
    out.push(prior);
  }
  return out;
}

/** Block keys (hex of each digest's first 8 bytes, i.e. the event's int64 as unsigned) of the full pages. */
export function sglangBlockKeys(tokens: readonly number[], pageSize: number, maxBlocks = Infinity): string[] {
  return sglangBlockDigests(tokens, pageSize, maxBlocks).map((d) => hex8(d, 0));
}
