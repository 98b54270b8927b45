import type { KvEventOut } from '@triad/kv-events';
import type { CachedPrompt, PromptCache } from '../engine/prefix-cache';
import type { PromptBlock, SimBlockHashing } from './block-hashing';

/** Where a rank's cache changes go (one batch per event-loop turn, like an engine step). */
export interface KvEventEmitter {
  emit(event: KvEventOut): void;
}

/**
 * A rank's prefix cache at token level, as vLLM's and SGLang's are: full blocks keyed by the engine's chained
 * block hash, a block hitting only when every block before it hit, least recently used blocks evicted once
 * `capacityBlocks` are held. Every change is published as the engines publish it: new blocks as `BlockStored`
 * (one event per contiguous run, with the parent's hash and the run's tokens), evicted ones as `BlockRemoved`
 * (announced before the blocks that took their place), a reset as `AllBlocksCleared`.
 */
export class TokenPrefixCache implements PromptCache {
  readonly #capacity: number;
  readonly #hashing: SimBlockHashing;
  readonly #events: KvEventEmitter;
  /** Block key → wire hash, least recently used first. */
  readonly #blocks = new Map<string, Uint8Array | bigint>();

  constructor(capacityBlocks: number, hashing: SimBlockHashing, events: KvEventEmitter) {
    this.#capacity = Math.max(1, capacityBlocks);
    this.#hashing = hashing;
    this.#events = events;
  }

  get size(): number {
    return this.#blocks.size;
  }

  has(key: string): boolean {
    return this.#blocks.has(key);
  }

  lookup(prompt: CachedPrompt): number {
    const { blocks, tokenCount } = this.#hashing.hash(prompt);
    let hit = 0;
    let missed = false;
    const added = new Set<string>();
    for (const block of blocks) {
      const held = this.#blocks.get(block.key);
      if (held !== undefined) {
        if (!missed) hit++;
        this.#blocks.delete(block.key);
        this.#blocks.set(block.key, held);
      } else {
        missed = true;
        this.#blocks.set(block.key, block.wire);
        added.add(block.key);
      }
    }
    this.#evict(added);
    this.#announce(blocks, added);
    if (tokenCount === 0 || hit === 0) return 0;
    // Scaled to the simulator's own token count (which prices prefill and usage), all but the last token at most.
    const cached = Math.round((hit * this.#hashing.blockSize * prompt.promptTokens) / tokenCount);
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
    const removed: (Uint8Array | bigint)[] = [];
    for (const [key, wire] of this.#blocks) {
      if (over-- <= 0) break;
      this.#blocks.delete(key);
      // A block stored and evicted within the same step was never announced, so its removal is not either.
      if (!added.delete(key)) removed.push(wire);
    }
    if (removed.length > 0) this.#events.emit({ type: 'removed', hashes: removed });
  }

  #announce(blocks: readonly PromptBlock[], added: ReadonlySet<string>): void {
    let run: PromptBlock[] = [];
    let parent: PromptBlock | undefined;
    const flush = (): void => {
      if (run.length === 0) return;
      this.#events.emit({
        type: 'stored',
        hashes: run.map((b) => b.wire),
        parent: parent?.wire,
        tokens: run.flatMap((b) => b.tokens),
        blockSize: this.#hashing.blockSize,
      });
      run = [];
    };
    let previous: PromptBlock | undefined;
    for (const block of blocks) {
      if (added.has(block.key)) {
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
