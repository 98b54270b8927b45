import { fnv1a } from './tokens';

/** Characters per simulated KV block (16 tokens at four characters per token). */
const BLOCK_CHARS = 64;
export const BLOCK_TOKENS = 16;

/** What a prefix cache looks a request up by. */
export interface CachedPrompt {
  readonly kind: 'chat' | 'completion' | 'generate';
  readonly body: Record<string, unknown>;
  readonly model: string | undefined;
  /** The simulator's prompt text (media replaced by short content hashes). */
  readonly promptText: string;
  readonly promptTokens: number;
}

/** A rank's prefix cache: the character-keyed default, or the token-keyed one that publishes KV events. */
export interface PromptCache {
  /** Returns how many prompt tokens were already cached (at most all but the last), and records the prompt's blocks. */
  lookup(prompt: CachedPrompt): number;
  /** Forgets every block (`/reset_prefix_cache`, `/flush_cache`). */
  clear(): void;
}

/**
 * A prefix cache keyed by chained block hashes, as vLLM and SGLang key theirs: a block hits only when every block
 * before it hit too. Least recently used blocks are evicted once `capacityBlocks` is reached.
 */
export class PrefixCache implements PromptCache {
  readonly #capacity: number;
  readonly #blocks = new Map<number, true>();

  constructor(capacityBlocks: number) {
    this.#capacity = Math.max(1, capacityBlocks);
  }

  lookup(prompt: CachedPrompt): number {
    return this.lookupAndInsert(prompt.promptText, prompt.promptTokens);
  }

  clear(): void {
    this.#blocks.clear();
  }

  /** Returns how many prompt tokens were already cached, and records the prompt's blocks. */
  lookupAndInsert(promptText: string, promptTokens: number): number {
    let hash = 0x811c9dc5;
    let hitBlocks = 0;
    let missed = false;
    const fullBlocks = Math.floor(promptText.length / BLOCK_CHARS);
    for (let b = 0; b < fullBlocks; b++) {
      hash = fnv1a(promptText.slice(b * BLOCK_CHARS, (b + 1) * BLOCK_CHARS), hash);
      if (!missed && this.#blocks.has(hash)) {
        hitBlocks++;
        this.#blocks.delete(hash);
      } else {
        missed = true;
      }
      this.#blocks.set(hash, true);
    }
    while (this.#blocks.size > this.#capacity) {
      const oldest = this.#blocks.keys().next().value as number;
      this.#blocks.delete(oldest);
    }
    // The last prompt token is always recomputed, as the real engines do.
    return Math.min(hitBlocks * BLOCK_TOKENS, Math.max(0, promptTokens - 1));
  }
}
