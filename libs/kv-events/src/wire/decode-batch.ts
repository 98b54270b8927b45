import { decode } from '@msgpack/msgpack';
import { keyOfEngineHash } from '../hashing/block-key';
import type { KvEvent, KvEventBatch } from './kv-event';

/** Why a payload could not be read; the message names the first problem. */
export class KvEventDecodeError extends Error {}

type Fields = Record<string, unknown>;

// Field order of the array form (msgspec `array_like=True`), per event tag: vllm/distributed/kv_events.py and
// sglang/srt/disaggregation/kv_events.py. Later vLLM versions append fields; unknown trailing ones are ignored.
const ARRAY_FIELDS: Record<string, readonly string[]> = {
  BlockStored: [
    'block_hashes',
    'parent_block_hash',
    'token_ids',
    'block_size',
    'lora_id',
    'medium',
    'lora_name',
    'extra_keys',
    'group_idx',
    'kv_cache_spec_kind',
    'kv_cache_spec_sliding_window',
  ],
  BlockRemoved: ['block_hashes', 'medium', 'group_idx'],
  AllBlocksCleared: [],
};

/**
 * Decodes a `KVEventBatch` msgpack payload. The batch is an array `[ts, events, data_parallel_rank?]` (msgspec
 * `array_like`); each event is either a tagged array `["BlockStored", ...fields]` (SGLang, older vLLM) or a tagged
 * map `{"type": "BlockStored", ...}` (current vLLM, whose events are not array_like). Hashes may be bytes or ints.
 * Events of unknown tags decode as `unknown`; structurally invalid payloads throw {@link KvEventDecodeError}.
 */
export function decodeKvEventBatch(payload: Uint8Array): KvEventBatch {
  let raw: unknown;
  try {
    raw = decode(payload, { useBigInt64: true });
  } catch (err) {
    throw new KvEventDecodeError(`not msgpack: ${(err as Error).message}`);
  }
  let ts: unknown;
  let events: unknown;
  let rank: unknown;
  if (Array.isArray(raw)) [ts, events, rank] = raw;
  else if (raw !== null && typeof raw === 'object') ({ ts, events, data_parallel_rank: rank } = raw as Fields);
  else throw new KvEventDecodeError('batch is neither an array nor a map');
  if (typeof ts !== 'number' && typeof ts !== 'bigint') throw new KvEventDecodeError('batch ts is not a number');
  if (!Array.isArray(events)) throw new KvEventDecodeError('batch events is not an array');
  return {
    ts: Number(ts),
    events: events.map((e, i) => decodeEvent(e, i)),
    dpRank: typeof rank === 'number' ? rank : undefined,
  };
}

function decodeEvent(raw: unknown, i: number): KvEvent {
  let tag: unknown;
  let fields: Fields;
  if (Array.isArray(raw)) {
    tag = raw[0];
    fields = {};
    const names = typeof tag === 'string' ? ARRAY_FIELDS[tag] : undefined;
    names?.forEach((name, j) => (fields[name] = raw[j + 1]));
  } else if (raw !== null && typeof raw === 'object') {
    fields = raw as Fields;
    tag = fields['type'];
  } else {
    throw new KvEventDecodeError(`event ${i} is neither an array nor a map`);
  }
  if (typeof tag !== 'string') throw new KvEventDecodeError(`event ${i} has no string tag`);
  switch (tag) {
    case 'BlockStored': {
      const tokens = fields['token_ids'];
      const blockSize = fields['block_size'];
      if (!Array.isArray(tokens) || !tokens.every((t) => typeof t === 'number'))
        throw new KvEventDecodeError(`event ${i}: token_ids is not a list of ints`);
      if (typeof blockSize !== 'number') throw new KvEventDecodeError(`event ${i}: block_size is not an int`);
      const parentRaw = fields['parent_block_hash'];
      return {
        type: 'stored',
        hashes: hashList(fields['block_hashes'], i),
        parent: parentRaw === null || parentRaw === undefined ? undefined : hashOf(parentRaw, i),
        tokens: tokens,
        blockSize,
        loraName: optString(fields['lora_name']),
        medium: optString(fields['medium']),
        group: groupOf(fields['group_idx'], i),
        kind: optString(fields['kv_cache_spec_kind']),
        slidingWindow: typeof fields['kv_cache_spec_sliding_window'] === 'number' ? fields['kv_cache_spec_sliding_window'] : undefined,
      };
    }
    case 'BlockRemoved':
      return {
        type: 'removed',
        hashes: hashList(fields['block_hashes'], i),
        medium: optString(fields['medium']),
        group: groupOf(fields['group_idx'], i),
      };
    case 'AllBlocksCleared':
      return { type: 'cleared' };
    default:
      return { type: 'unknown', tag };
  }
}

function hashOf(raw: unknown, i: number): string {
  const key = keyOfEngineHash(raw);
  if (key === undefined) throw new KvEventDecodeError(`event ${i}: a block hash is neither bytes nor an int`);
  return key;
}

function hashList(raw: unknown, i: number): string[] {
  if (!Array.isArray(raw)) throw new KvEventDecodeError(`event ${i}: block_hashes is not a list`);
  return raw.map((h) => hashOf(h, i));
}

/** `group_idx`: absent or null is group 0 (single-group engines and older vLLM). */
function groupOf(v: unknown, i: number): number {
  if (v === null || v === undefined) return 0;
  const n = typeof v === 'bigint' ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 0 || n > 9999)
    throw new KvEventDecodeError(`event ${i}: group_idx is not a small int`);
  return n;
}

function optString(v: unknown): string | undefined {
  return typeof v === 'string' ? v : undefined;
}
