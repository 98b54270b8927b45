import { hybridPrefixBlocks, isPlainSource, type KvGroup } from './kv-groups';

/** How one KV-event source (an engine's event socket, i.e. one pod or one of its data-parallel ranks) stands. */
interface Source {
  readonly id: number;
  readonly name: string;
  readonly pod: string;
  /** Blocks held, least recently stored first (a Set keeps insertion order; a re-store moves a block to the end). */
  readonly blocks: Set<string>;
  live: boolean;
  /** The engine's KV-cache groups (hybrid models); undefined for a single group of the request's block size. */
  groups: readonly KvGroup[] | undefined;
}

interface KvBlockIndexOptions {
  /**
   * Most (source, block) entries held in total. Past it, the source holding the most blocks loses its least
   * recently stored ones, so memory stays bounded even when an engine's removals are lost. Default 4 000 000.
   */
  readonly maxEntries?: number;
}

interface KvBlockIndexStats {
  readonly sources: number;
  readonly liveSources: number;
  readonly blocks: number;
  readonly entries: number;
  readonly evicted: number;
}

/**
 * Which engine holds which KV blocks, from the engines' own events: block key (hex16, see libs/kv-events block
 * keys) → sources holding it, and per source its blocks. A source belongs to a pod (`namespace/pod`); a pod with
 * a live source "publishes events" and is scored from here, any other pod by the approximate prefix scorer.
 * Fed by the scheduler app (and in-process gateways) from the indexer's NATS deltas; read by plugins. Pure state.
 */
export class KvBlockIndex {
  readonly #maxEntries: number;
  /** block key → id of its one holder, or the ids of all holders. */
  readonly #owners = new Map<string, number | number[]>();
  readonly #byName = new Map<string, Source>();
  readonly #byId: (Source | undefined)[] = [];
  readonly #byPod = new Map<string, Source[]>();
  /** Sources with KV-cache groups (hybrid models), matched one by one. */
  readonly #grouped = new Set<Source>();
  #nextId = 0;
  #entries = 0;
  /** Highest KV-cache group index among stored keys (group keys end in `~<group>`). */
  #maxGroup = 0;
  #evicted = 0;
  /** Scratch for prefix runs: run length per source id, valid where `#runStamp` equals `#stamp`. */
  #run = new Int32Array(16);
  #runStamp = new Uint32Array(16);
  #stamp = 0;

  constructor(options: KvBlockIndexOptions = {}) {
    this.#maxEntries = options.maxEntries ?? 4_000_000;
  }

  #source(name: string, pod: string): Source {
    let s = this.#byName.get(name);
    if (s) return s;
    s = { id: this.#nextId++, name, pod, blocks: new Set(), live: false, groups: undefined };
    this.#byName.set(name, s);
    this.#byId[s.id] = s;
    const list = this.#byPod.get(pod);
    if (list) list.push(s);
    else this.#byPod.set(pod, [s]);
    if (this.#run.length <= s.id) {
      const size = Math.max(this.#run.length * 2, s.id + 1);
      this.#run = new Int32Array(size);
      this.#runStamp = new Uint32Array(size);
    }
    return s;
  }

  /** Records blocks stored by `source` (of `pod`); a block already held moves to the most recent end. */
  store(source: string, pod: string, keys: readonly string[]): void {
    const s = this.#source(source, pod);
    for (const key of keys) {
      if (key.length > 17 && key.charCodeAt(16) === 126 /* ~ */) this.#maxGroup = Math.max(this.#maxGroup, Number(key.slice(17)));
      if (s.blocks.delete(key)) {
        s.blocks.add(key);
        continue;
      }
      s.blocks.add(key);
      this.#own(key, s.id);
      this.#entries++;
    }
    if (this.#entries > this.#maxEntries) this.#evict();
  }

  /** Records blocks removed (evicted) by `source`. Unknown blocks are ignored. */
  remove(source: string, keys: readonly string[]): void {
    const s = this.#byName.get(source);
    if (!s) return;
    for (const key of keys) {
      if (!s.blocks.delete(key)) continue;
      this.#unown(key, s.id);
      this.#entries--;
    }
  }

  /** Forgets every block of `source` (AllBlocksCleared, an engine restart, a resync); the source stays known. */
  clear(source: string): void {
    const s = this.#byName.get(source);
    if (!s) return;
    for (const key of s.blocks) this.#unown(key, s.id);
    this.#entries -= s.blocks.size;
    s.blocks.clear();
  }

  /**
   * Marks a source live (its pod is scored from the index) or not (its pod falls back to the approximate scorer).
   * A source starts not live: blocks arriving before its state is known do not yet decide its pod's score.
   */
  setLive(source: string, pod: string, live: boolean): void {
    this.#source(source, pod).live = live;
  }

  /**
   * Sets a source's KV-cache groups (from its indexer record): hybrid models keep one block chain per group, each
   * at its own block size, and their blocks are matched per group (see {@link prefixMatches}).
   */
  setGroups(source: string, pod: string, groups: readonly KvGroup[] | undefined): void {
    const s = this.#source(source, pod);
    s.groups = groups && groups.length > 0 ? [...groups].sort((a, b) => a.idx - b.idx) : undefined;
    if (s.groups) this.#grouped.add(s);
    else this.#grouped.delete(s);
  }

  /** Forgets a source entirely (its pod is gone, or no indexer follows it any more). */
  dropSource(source: string): void {
    const s = this.#byName.get(source);
    if (!s) return;
    this.clear(source);
    this.#grouped.delete(s);
    this.#byName.delete(source);
    this.#byId[s.id] = undefined;
    const list = this.#byPod.get(s.pod);
    if (list) {
      const rest = list.filter((x) => x !== s);
      if (rest.length > 0) this.#byPod.set(s.pod, rest);
      else this.#byPod.delete(s.pod);
    }
  }

  /** Whether any source of `pod` is live: the pod's cache is known from its own events. */
  podIsLive(pod: string): boolean {
    const list = this.#byPod.get(pod);
    if (!list) return false;
    for (const s of list) if (s.live) return true;
    return false;
  }

  /**
   * For each pod with a live source, how many leading blocks of `keys` one of its sources holds (a prefix: block i
   * counts only when blocks 0..i-1 are held by the same source). Calls `visit(pod, blocks)` once per such pod with
   * blocks ≥ 1. One walk over the keys, stopping at the first block nobody live holds. `keys` are chained at
   * `blockSize` tokens per block (vLLM's hash_block_size); sources of hybrid models are matched group by group as
   * vLLM's KV-cache coordinator finds a hit, and their prefix is counted in blocks of `blockSize`.
   */
  prefixMatches(keys: readonly string[], visit: (pod: string, blocks: number) => void, blockSize?: number): void {
    const stamp = ++this.#stamp;
    const run = this.#run;
    const runStamp = this.#runStamp;
    const touched: Source[] = [];
    const best = new Map<string, number>();
    if (this.#grouped.size > 0 && blockSize !== undefined) {
      for (const s of this.#grouped) {
        if (!s.live || isPlainSource(s.groups, blockSize)) continue;
        const n = hybridPrefixBlocks(s.groups as readonly KvGroup[], keys, blockSize, (key) => this.#holds(key, s.id));
        if (n > (best.get(s.pod) ?? 0)) best.set(s.pod, n);
      }
    }
    for (let i = 0; i < keys.length; i++) {
      const owners = this.#owners.get(keys[i]);
      if (owners === undefined) break;
      let extended = false;
      const step = (id: number): void => {
        const s = this.#byId[id];
        if (!s?.live || (s.groups !== undefined && !isPlainSource(s.groups, blockSize))) return;
        if (runStamp[id] !== stamp) {
          if (i !== 0) return;
          runStamp[id] = stamp;
          run[id] = 0;
          touched.push(s);
        }
        if (run[id] === i) {
          run[id] = i + 1;
          extended = true;
        }
      };
      if (typeof owners === 'number') step(owners);
      else for (const id of owners) step(id);
      if (!extended) break;
    }
    for (const s of touched) {
      const n = run[s.id];
      if (n > (best.get(s.pod) ?? 0)) best.set(s.pod, n);
    }
    for (const [pod, n] of best) visit(pod, n);
  }

  /** Whether any source holds block `key` in any KV-cache group. */
  knows(key: string): boolean {
    if (this.#owners.has(key)) return true;
    for (let g = 1; g <= this.#maxGroup; g++) if (this.#owners.has(`${key}~${g}`)) return true;
    return false;
  }

  #holds(key: string, id: number): boolean {
    const owners = this.#owners.get(key);
    return owners === id || (Array.isArray(owners) && owners.includes(id));
  }

  /** Block keys held by a source (tests, snapshots). */
  blocksOf(source: string): readonly string[] {
    return [...(this.#byName.get(source)?.blocks ?? [])];
  }

  /** How many blocks a source holds, without copying them. */
  blockCount(source: string): number {
    return this.#byName.get(source)?.blocks.size ?? 0;
  }

  stats(): KvBlockIndexStats {
    let live = 0;
    for (const s of this.#byName.values()) if (s.live) live++;
    return { sources: this.#byName.size, liveSources: live, blocks: this.#owners.size, entries: this.#entries, evicted: this.#evicted };
  }

  #own(key: string, id: number): void {
    const cur = this.#owners.get(key);
    if (cur === undefined) this.#owners.set(key, id);
    else if (typeof cur === 'number') this.#owners.set(key, [cur, id]);
    else cur.push(id);
  }

  #unown(key: string, id: number): void {
    const cur = this.#owners.get(key);
    if (cur === undefined) return;
    if (typeof cur === 'number') {
      if (cur === id) this.#owners.delete(key);
      return;
    }
    const at = cur.indexOf(id);
    if (at < 0) return;
    cur.splice(at, 1);
    if (cur.length === 1) this.#owners.set(key, cur[0]);
  }

  /** Over the cap: the largest source loses its least recently stored tenth (at least one block). */
  #evict(): void {
    while (this.#entries > this.#maxEntries) {
      let largest: Source | undefined;
      for (const s of this.#byName.values()) if (!largest || s.blocks.size > largest.blocks.size) largest = s;
      if (!largest || largest.blocks.size === 0) return;
      let n = Math.max(1, Math.ceil(largest.blocks.size / 10), this.#entries - this.#maxEntries);
      for (const key of largest.blocks) {
        if (n-- <= 0) break;
        largest.blocks.delete(key);
        this.#unown(key, largest.id);
        this.#entries--;
        this.#evicted++;
      }
    }
  }
}
