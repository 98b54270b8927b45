import { z } from 'zod';
import { SCHEMA_VERSION } from './records';

/** Bounds that keep one KV-index message under NATS' default 1 MiB payload. */
export const KvIndexLimits = { maxKeysPerDelta: 20_000, maxKeysPerChunk: 20_000 } as const;

/**
 * A block key: 16 hex digits (libs/kv-events block keys), with `~<group>` for the blocks of KV-cache group 1 and up
 * of hybrid models (vLLM `group_idx`); group 0 keys carry no suffix.
 */
const BlockKey = z.string().regex(/^[0-9a-f]{16}(?:~[1-9][0-9]{0,3})?$/);

/** One KV-cache group of a source's engine, as its BlockStored events describe it. */
export const KvGroupSpecSchema = z.object({
  /** vLLM `group_idx`. */
  idx: z.number().int().min(0).max(9999),
  /** Tokens per block of this group. */
  blockSize: z.number().int().min(1),
  /** vLLM `kv_cache_spec_kind` (`full_attention`, `sliding_window`, `mamba`, …), when the engine reports it. */
  kind: z.string().max(64).optional(),
  /** vLLM `kv_cache_spec_sliding_window` in tokens, for sliding-window groups. */
  slidingWindow: z.number().int().min(1).optional(),
});
export type KvGroupSpec = z.infer<typeof KvGroupSpecSchema>;

/**
 * A change to one event source's blocks, published by the indexer that follows the source. `seq` counts the
 * deltas of one `epoch` (one follower's lifetime) from 0; a receiver that sees a gap reloads the source from its
 * snapshot. `clear` empties the source before `stored` / `removed` apply (engine restart, AllBlocksCleared).
 */
export const KvIndexDeltaSchema = z.object({
  v: z.literal(SCHEMA_VERSION),
  /** `namespace/pod`, with `#<rank>` for data-parallel ranks above 0. */
  source: z.string().min(1),
  /** `namespace/pod`. */
  pod: z.string().min(1),
  epoch: z.string().min(1),
  seq: z.number().int().min(0),
  clear: z.boolean().optional(),
  stored: z.array(BlockKey).max(KvIndexLimits.maxKeysPerDelta).default([]),
  removed: z.array(BlockKey).max(KvIndexLimits.maxKeysPerDelta).default([]),
  /** When the engine stamped the batch (ms since the epoch), for index-lag metrics. */
  engineTs: z.number().optional(),
  /** When the indexer published the delta (ms since the epoch). */
  publishedAt: z.number(),
});
export type KvIndexDelta = z.infer<typeof KvIndexDeltaSchema>;

/**
 * The state of one source in the `triad_v1_kvindex` bucket (key `m.<sourceToken>`): whether its blocks can be
 * trusted (`live`) and, when not, why; and which snapshot (chunks `c.<sourceToken>.<i>`, i < chunks, all carrying
 * `snapshotId`) holds its blocks as of delta `seq` of `epoch`.
 */
export const KvSourceMetaSchema = z.object({
  v: z.literal(SCHEMA_VERSION),
  source: z.string().min(1),
  pod: z.string().min(1),
  epoch: z.string().min(1),
  seq: z.number().int().min(0),
  state: z.enum(['live', 'down']),
  reason: z.string().optional(),
  blockSize: z.number().int().min(1).optional(),
  /** The engine's KV-cache groups, once its events named more than group 0 or a group's kind (hybrid models). */
  groups: z.array(KvGroupSpecSchema).max(64).optional(),
  snapshotId: z.string(),
  chunks: z.number().int().min(0),
  blocks: z.number().int().min(0),
  indexer: z.string(),
  updatedAt: z.number(),
});
export type KvSourceMeta = z.infer<typeof KvSourceMetaSchema>;

export const KvSnapshotChunkSchema = z.object({
  v: z.literal(SCHEMA_VERSION),
  snapshotId: z.string(),
  keys: z.array(BlockKey).max(KvIndexLimits.maxKeysPerChunk),
});
export type KvSnapshotChunk = z.infer<typeof KvSnapshotChunkSchema>;

/** A KV indexer replica's heartbeat (bucket `triad_v1_kvindexers`, key = instance id). */
export const KvIndexerHeartbeatSchema = z.object({
  v: z.literal(SCHEMA_VERSION),
  id: z.string().min(1),
  at: z.number(),
});
export type KvIndexerHeartbeat = z.infer<typeof KvIndexerHeartbeatSchema>;

/** A pod-watcher replica's membership heartbeat on `triad.v1.podwatcher.heartbeat.<scope>`. */
export const PodWatcherHeartbeatSchema = z.object({
  v: z.literal(SCHEMA_VERSION),
  /** The replica's identity (`--identity`). */
  id: z.string().min(1),
  /** The sender just joined: the others answer with a heartbeat at once, so it learns them within a round trip. */
  hello: z.boolean().optional(),
  /** The sender is shutting down: the others take over its share at once instead of after the timeout. */
  leaving: z.boolean().optional(),
});
export type PodWatcherHeartbeat = z.infer<typeof PodWatcherHeartbeatSchema>;

const token = (s: string): string => s.replace(/[^A-Za-z0-9_-]/g, (c) => `_${c.charCodeAt(0).toString(16).padStart(2, '0')}`);

/** KV key token of a source name (reversible, only characters KV keys allow in one token). */
export function kvSourceToken(source: string): string {
  return token(source);
}

export const kvSourceMetaKey = (source: string): string => `m.${kvSourceToken(source)}`;
export const kvSnapshotChunkKey = (source: string, i: number): string => `c.${kvSourceToken(source)}.${i}`;
