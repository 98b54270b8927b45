/** 32-bit FNV-1a with a murmur3 finish, for rendezvous hashing. */
function hash32(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/**
 * Rendezvous (highest random weight) hashing: the member with the highest hash of (key, member) owns the key.
 * When a member joins or leaves, only the keys it wins or held move. Undefined when there are no members.
 */
export function ownerOf(key: string, members: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestScore = -1;
  for (const m of members) {
    const score = hash32(`${key}\u0000${m}`);
    if (score > bestScore || (score === bestScore && best !== undefined && m < best)) {
      best = m;
      bestScore = score;
    }
  }
  return best;
}
