import { encode } from '@msgpack/msgpack';

/** An event to publish, in the engine's own terms (simulated engines). Hashes are the engine's wire values. */
export type KvEventOut =
  | {
      readonly type: 'stored';
      readonly hashes: readonly (Uint8Array | bigint)[];
      readonly parent: Uint8Array | bigint | undefined;
      readonly tokens: readonly number[];
      readonly blockSize: number;
      readonly loraName?: string;
      /** vLLM `group_idx` and the group's spec (hybrid models); left out for single-group engines. */
      readonly group?: number;
      readonly kind?: string;
      readonly slidingWindow?: number;
    }
  | { readonly type: 'removed'; readonly hashes: readonly (Uint8Array | bigint)[]; readonly group?: number }
  | { readonly type: 'cleared' };

/** Which engine's wire form to write: vLLM's tagged maps or SGLang's tagged arrays. */
export type KvWireForm = 'vllm' | 'sglang';

/**
 * Encodes a `KVEventBatch` as the engines do with msgspec: the batch as an array `[ts, events, dp_rank]`; vLLM
 * events as maps tagged `type` (lora_id, medium and lora_name always present; defaulted fields omitted), SGLang
 * events as arrays `[tag, ...fields]`.
 */
export function encodeKvEventBatch(form: KvWireForm, ts: number, events: readonly KvEventOut[], dpRank = 0): Uint8Array {
  const out = events.map((e) => (form === 'vllm' ? vllmEvent(e) : sglangEvent(e)));
  return encode([ts, out, dpRank], { useBigInt64: true });
}

function vllmEvent(e: KvEventOut): unknown {
  switch (e.type) {
    case 'stored':
      return {
        type: 'BlockStored',
        block_hashes: e.hashes,
        parent_block_hash: e.parent ?? null,
        token_ids: e.tokens,
        block_size: e.blockSize,
        lora_id: null,
        medium: 'GPU',
        lora_name: e.loraName ?? null,
        ...(e.group !== undefined ? { group_idx: e.group } : {}),
        ...(e.kind !== undefined ? { kv_cache_spec_kind: e.kind } : {}),
        ...(e.slidingWindow !== undefined ? { kv_cache_spec_sliding_window: e.slidingWindow } : {}),
      };
    case 'removed':
      return { type: 'BlockRemoved', block_hashes: e.hashes, medium: 'GPU', ...(e.group !== undefined ? { group_idx: e.group } : {}) };
    case 'cleared':
      return { type: 'AllBlocksCleared' };
  }
}

function sglangEvent(e: KvEventOut): unknown {
  switch (e.type) {
    case 'stored':
      return ['BlockStored', e.hashes, e.parent ?? null, e.tokens, e.blockSize, null, 'GPU'];
    case 'removed':
      return ['BlockRemoved', e.hashes, 'GPU'];
    case 'cleared':
      return ['AllBlocksCleared'];
  }
}
