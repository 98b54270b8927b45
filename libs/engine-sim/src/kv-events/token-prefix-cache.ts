import type { CachedPrompt, PromptCache } from '../engine/prefix-cache';
import { groupKey, type KvEventOut } from '@triad/kv-events';
import type { GroupBlocks, PromptBlock, SimBlockHashing } from './block-hashing';

/** Where a rank's cache changes go (one batch per event-loop turn, like an engine step). */
export interface KvEventEmitter {
  emit(event: KvEventOut): void;
}

/**
 * A rank's prefix cache at token level, as vLLM's and SGLang's are: full blocks keyed by the engine's chained
 * block hash (per KV-cache group for a hybrid model), a block hitting only when every block before it hit, least
 * recently used blocks evicted once `capacityBlocks` are held. Every change is published as the engines publish it:
 * new blocks as `BlockStored` (one event per contiguous run of a group, with the parent's hash, the run's tokens and
 * the group's index, block size and kind), evicted ones as `BlockRemoved` with their group (announced before the
 * blocks that took their place), a reset as `AllBlocksCleared`. The hit is the first group's.
 */
export class TokenPrefixCache implements PromptCache {
  readonly #capacity: number;
  readonly #hashing: SimBlockHashing;
  readonly #events: KvEventEmitter;
  /** Group key → group and wire hash, least recently used first. */
  readonly #blocks = new Map<string, { group: number; wire: Uint8Array | bigint }>();

  constructor(capacityBlocks: number, hashing: SimBlockHashing, events: KvEventEmitter) {
    this.#capacity = Math.max(1, capacityBlocks);
    this.#hashing = hashing;
    this.#events = events;
  }

  get size(): number {
    return this.#blocks.size;
  }

  has(key: string, group = 0): boolean {
    return this.#blocks.has(groupKey(key, group));
  }

  lookup(prompt: CachedPrompt): number {
    const { groups, tokenCount } = this.#hashing.hash(prompt);
    const added = new Set<string>();
    let hitTokens = 0;
    groups.forEach((g, gi) => {
      let hit = 0;
      let missed = false;
      for (const block of g.blocks) {
        const key = groupKey(block.key, g.idx);
        const held = this.#blocks.get(key);
        if (held !== undefined) {
          if (!missed) hit++;
          this.#blocks.delete(key);
          this.#blocks.set(key, held);
        } else {
          missed = true;
          this.#blocks.set(key, { group: g.idx, wire: block.wire });
          added.add(key);
        }
      }
      if (gi === 0) hitTokens = hit * g.spec.blockSize;
    });
    this.#evict(added);
    for (const g of groups) this.#announce(g, added);
    if (tokenCount === 0 || hitTokens === 0) return 0;
    // Scaled to the simulator's own token count (which prices prefill and usage), all but the last token at most.
    const cached = Math.round((hitTokens * prompt.promptTokens) / tokenCount);
    return Math.min(cached, Math.max(0, prompt.promptTokens - 1));
  }

  clear(): void {
    this.#blocks.clear();
    this.#events.emit({ type: 'cleared' });
  }

  /** Forgets everything without a word: the engine process restarted. */
  forget(): void {
    this.#blocks.clear();
  }

  #evict(added: Set<string>): void {
    let over = this.#blocks.size - this.#capacity;
    if (over <= 0) return;
    const removed = new Map<number, (Uint8Array | bigint)[]>();
    for (const [key, { group, wire }] of this.#blocks) {
      if (over-- <= 0) break;
      this.#blocks.delete(key);
      // A block stored and evicted within the same step was never announced, so its removal is not either.
      if (added.delete(key)) continue;
      const list = removed.get(group);
      if (list) list.push(wire);
      else removed.set(group, [wire]);
    }
    for (const [group, hashes] of removed) this.#events.emit({ type: 'removed', hashes, ...(this.#grouped ? { group } : {}) });
  }

  /** Whether events carry their group: only a simulated hybrid model's do (as vLLM's always do, from 0). */
  get #grouped(): boolean {
    return this.#hashing.hybrid;
  }

  #announce(g: GroupBlocks, added: ReadonlySet<string>): void {
    let run: PromptBlock[] = [];
    let parent: PromptBlock | undefined;
    const flush = (): void => {
      if (run.length === 0) return;
      this.#events.emit({
        type: 'stored',
        hashes: run.map((b) => b.wire),
        parent: parent?.wire,
        tokens: run.flatMap((b) => b.tokens),
        blockSize: g.spec.blockSize,
        ...(this.#grouped
          ? {
              group: g.idx,
              ...(g.spec.kind !== undefined ? { kind: g.spec.kind } : {}),
              ...(g.spec.slidingWindow !== undefined ? { slidingWindow: g.spec.slidingWindow } : {}),
            }
          : {}),
      });
      run = [];
    };
    let previous: PromptBlock | undefined;
    for (const block of g.blocks) {
      if (added.has(groupKey(block.key, g.idx))) {
        if (run.length === 0) parent = previous;
        run.push(block);
      } else {
        flush();
      }
      previous = block;
    }
    flush();
  }
}
