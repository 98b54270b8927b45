/** 32-bit FNV-1a, then a murmur3 finalizer so similar strings spread over the whole range. */
function hash32(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/**
 * Which live pod-watcher replica owns a key (an endpoint record, and so the scrape of its engine): rendezvous
 * (highest-random-weight) hashing, a consistent hashing scheme: every replica computes the same owner from the
 * same member list, and when a replica joins or leaves only the keys it gains or held move (about 1/N of them).
 * Owners are cached per key until the members change.
 */
export class ShardRing {
  readonly #self: string;
  #members: readonly string[];
  readonly #cache = new Map<string, boolean>();

  constructor(self: string, members: readonly string[] = [self]) {
    this.#self = self;
    this.#members = normalize(self, members);
  }

  get self(): string {
    return this.#self;
  }

  get members(): readonly string[] {
    return this.#members;
  }

  /** Replaces the member list (this replica is always one); returns false when nothing changed. */
  setMembers(members: readonly string[]): boolean {
    const next = normalize(this.#self, members);
    if (next.length === this.#members.length && next.every((m, i) => m === this.#members[i])) return false;
    this.#members = next;
    this.#cache.clear();
    return true;
  }

  /** The replica that owns `key`. */
  ownerOf(key: string): string {
    let best = this.#self;
    let bestWeight = -1;
    for (const m of this.#members) {
      const w = hash32(`${m}\u0000${key}`);
      // Ties (practically never) go to the smaller name, the same on every replica.
      if (w > bestWeight || (w === bestWeight && m < best)) {
        best = m;
        bestWeight = w;
      }
    }
    return best;
  }

  /** True when this replica owns `key`. */
  owns(key: string): boolean {
    if (this.#members.length === 1) return true;
    let mine = this.#cache.get(key);
    if (mine === undefined) {
      mine = this.ownerOf(key) === this.#self;
      this.#cache.set(key, mine);
    }
    return mine;
  }
}

function normalize(self: string, members: readonly string[]): string[] {
  return [...new Set([self, ...members])].sort();
}
