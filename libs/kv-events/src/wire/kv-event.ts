/** A KV-cache event as the indexer uses it, whatever wire form it came in. Block hashes are block keys (hex16). */
export type KvEvent =
  | {
      readonly type: 'stored';
      readonly hashes: readonly string[];
      readonly parent: string | undefined;
      readonly tokens: readonly number[];
      readonly blockSize: number;
      readonly loraName: string | undefined;
      readonly medium: string | undefined;
      /** vLLM `group_idx` (0 when absent): the KV-cache group of hybrid models the blocks belong to. */
      readonly group: number;
      /** vLLM `kv_cache_spec_kind` / `kv_cache_spec_sliding_window`, when the engine sends them. */
      readonly kind: string | undefined;
      readonly slidingWindow: number | undefined;
    }
  | { readonly type: 'removed'; readonly hashes: readonly string[]; readonly medium: string | undefined; readonly group: number }
  | { readonly type: 'cleared' }
  | { readonly type: 'unknown'; readonly tag: string };

/** One decoded batch (`KVEventBatch`): engine time (seconds since the epoch), events, data-parallel rank. */
export interface KvEventBatch {
  readonly ts: number;
  readonly events: readonly KvEvent[];
  readonly dpRank: number | undefined;
}
