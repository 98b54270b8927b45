/**
 * Block keys: how Triad names a KV block everywhere (index, NATS deltas, scheduling requests). A key is the 64-bit
 * integer form of the engine's block hash, as 16 lowercase hex digits:
 * - vLLM `bytes` hashes → the last 8 bytes, big-endian (what vLLM itself sends when
 *   VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES is set: `int.from_bytes(h, "big") & (2**64 - 1)`), so both event forms
 *   give the same key;
 * - integer hashes (vLLM int form, SGLang's signed int64) → their two's-complement 64-bit value.
 */
const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));

/** Hex of 8 bytes of `digest` starting at `offset`. */
export function hex8(digest: Uint8Array, offset: number): string {
  let s = '';
  for (let i = offset; i < offset + 8; i++) s += HEX[digest[i]];
  return s;
}

/** Key of a hash given as bytes (vLLM): its last 8 bytes; shorter hashes are left-padded with zeros. */
export function keyOfBytes(hash: Uint8Array): string {
  if (hash.length >= 8) return hex8(hash, hash.length - 8);
  const padded = new Uint8Array(8);
  padded.set(hash, 8 - hash.length);
  return hex8(padded, 0);
}

const U64 = (1n << 64n) - 1n;

/** Key of a hash given as an integer (msgpack int64/uint64): its two's-complement 64-bit value. */
export function keyOfInt(hash: number | bigint): string {
  const v = (typeof hash === 'bigint' ? hash : BigInt(hash)) & U64;
  return v.toString(16).padStart(16, '0');
}

/** Key of an engine hash in either wire form; undefined for anything else. */
export function keyOfEngineHash(hash: unknown): string | undefined {
  if (hash instanceof Uint8Array) return hash.length > 0 ? keyOfBytes(hash) : undefined;
  if (typeof hash === 'bigint') return keyOfInt(hash);
  if (typeof hash === 'number' && Number.isInteger(hash)) return keyOfInt(hash);
  return undefined;
}

/** The key of a block of KV-cache group `group`: the block key, with `~<group>` above group 0. */
export function groupKey(key: string, group: number): string {
  return group === 0 ? key : `${key}~${group}`;
}
