import { createHash } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import type { PromptTokens } from '@triad/kv-events';

/** Body fields that decide what the engine renders and tokenizes (sampling fields do not). */
const RENDER_FIELDS = [
  'prompt',
  'messages',
  'tools',
  'documents',
  'add_generation_prompt',
  'continue_final_message',
  'chat_template_kwargs',
  'add_special_tokens',
  'mm_processor_kwargs',
] as const;

/** A digest of what the engine renders for this request under this tokenizer source (`scope`). */
export function renderKey(scope: string, model: string, body: Record<string, unknown>): string {
  const h = createHash('sha256').update(scope).update('\u0000').update(model);
  for (const f of RENDER_FIELDS) {
    const v = body[f];
    if (v === undefined) continue;
    h.update('\u0000').update(f).update('\u0000').update(JSON.stringify(v));
  }
  return h.digest('base64url');
}

/**
 * Token ids of recently rendered requests, least recently used dropped past `capacity` (0: nothing is kept): a
 * conversation's next turn re-sends the whole history, but the same request body (retries, fan-out, replays) is
 * tokenized once.
 */
export class TokenizeCache {
  readonly #entries: LRUCache<string, PromptTokens> | undefined;

  constructor(capacity: number) {
    this.#entries = capacity > 0 ? new LRUCache({ max: capacity }) : undefined;
  }

  get size(): number {
    return this.#entries?.size ?? 0;
  }

  get(key: string): PromptTokens | undefined {
    return this.#entries?.get(key);
  }

  set(key: string, value: PromptTokens): void {
    this.#entries?.set(key, value);
  }
}
