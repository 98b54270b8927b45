// Small non-cryptographic 32-bit hashes used on the hot path (tie-breaking, rendezvous hashing). They stay in
// plain JS on purpose: a native call per endpoint would cost more than the hash itself.

/** FNV-1a over the UTF-16 code units of `s`, finished with a murmur3 mix so nearby strings spread well. */
export function hashString32(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return mix32(h);
}

/** murmur3's fmix32 finaliser: a bijection on 32-bit integers with full avalanche. Returns an unsigned value. */
function mix32(x: number): number {
  let h = x | 0;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** Combines two 32-bit hashes into one (order matters), e.g. a request seed with an endpoint's key hash. */
export function combine32(a: number, b: number): number {
  return mix32(a ^ Math.imul(mix32(b + 0x9e3779b9), 0x27d4eb2d));
}
