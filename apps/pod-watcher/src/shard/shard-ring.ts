import { rendezvousOwner } from '@triad/scheduling/hashing';

/**
 * Which live pod-watcher replica owns a key (an endpoint record, and so the scrape of its engine): rendezvous
 * (highest-random-weight) hashing over the live replicas.
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

  /** The replica that owns `key` ({@link rendezvousOwner}; this replica is always a member). */
  ownerOf(key: string): string {
    return rendezvousOwner(key, this.#members) ?? this.#self;
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
