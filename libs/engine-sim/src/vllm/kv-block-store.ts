import type { SimCounters } from '../counters';
import { BLOCK_TOKENS } from '../engine/prefix-cache';
import type { HeldKv } from '../metrics/engine-metrics';

interface HeldBlocks {
  readonly blockIds: readonly number[];
  readonly numTokens: number;
  readonly expiresAt: number;
}

function heldKey(requestId: string, firstBlock: unknown): string {
  return `${requestId} ${String(firstBlock)}`;
}

export type PullResult =
  | {
      readonly ok: true;
      readonly numTokens: number;
      readonly blockIds: readonly number[];
    }
  | { readonly ok: false; readonly status: 404 | 409; readonly reason: string };

/**
 * A vLLM prefill's KV blocks held for remote decodes (NIXL `request_finished` semantics): blocks stay until a
 * decode reads them or the lease expires. Leases are equal, so the Map's insertion order is expiry order.
 */
export class KvBlockStore {
  readonly #held = new Map<string, HeldBlocks>();
  #nextBlock = 1;

  constructor(
    readonly engineId: string,
    readonly leaseMs: number,
    readonly counters: SimCounters,
  ) {}

  /** Keeps the blocks of a finished prefill; returns their ids. */
  hold(requestId: string, numTokens: number): readonly number[] {
    this.#expire();
    const count = Math.max(1, Math.ceil(numTokens / BLOCK_TOKENS));
    const blockIds = Array.from({ length: count }, () => this.#nextBlock++);
    // Keyed by request id and first block: a retried prefill of the same request (same X-Request-Id) holds a second
    // set of blocks, as vLLM does under its own unique internal request ids.
    this.#held.set(heldKey(requestId, blockIds[0]), { blockIds, numTokens, expiresAt: Date.now() + this.leaseMs });
    return blockIds;
  }

  /** A decode reads (and so frees) the blocks of `requestId`; ids and engine must match what was handed out. */
  pull(engineId: unknown, requestId: unknown, blockIds: unknown): PullResult {
    this.#expire();
    if (engineId !== this.engineId)
      return {
        ok: false,
        status: 409,
        reason: `remote_engine_id ${String(engineId)} is not this engine (${this.engineId})`,
      };
    const asked = Array.isArray(blockIds) ? blockIds.flat(2) : [];
    const key = typeof requestId === 'string' ? heldKey(requestId, asked[0]) : undefined;
    const held = key === undefined ? undefined : this.#held.get(key);
    if (!held || asked.length !== held.blockIds.length || asked.some((b, i) => b !== held.blockIds[i])) {
      const any = typeof requestId === 'string' && [...this.#held.keys()].some((k) => k.startsWith(`${requestId} `));
      if (!any) return { ok: false, status: 404, reason: `no KV blocks held for request ${String(requestId)}` };
      return { ok: false, status: 409, reason: 'remote_block_ids do not match the blocks held for this request' };
    }
    this.#held.delete(key as string);
    return { ok: true, numTokens: held.numTokens, blockIds: held.blockIds };
  }

  get size(): number {
    return this.#held.size;
  }

  /** What is held right now for decodes that have not read it (expired leases dropped first). */
  held(): HeldKv {
    this.#expire();
    let blocks = 0;
    for (const h of this.#held.values()) blocks += h.blockIds.length;
    return { requests: this.#held.size, blocks };
  }

  #expire(): void {
    const now = Date.now();
    for (const [id, held] of this.#held) {
      if (held.expiresAt > now) break;
      this.#held.delete(id);
      this.counters.inc('kvLeasesExpired');
    }
  }
}
