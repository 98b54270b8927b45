import {
  Buckets,
  KvIndexDeltaSchema,
  KvSnapshotChunkSchema,
  KvSourceMetaSchema,
  Subjects,
  kvSnapshotChunkKey,
  kvSourceMetaKey,
  type KvIndexDelta,
  type KvSourceMeta,
} from '@triad/bus';
import type { Bus, KvWatchHandle, TypedKv } from '@triad/bus/client';
import type { KvBlockIndex } from '@triad/scheduling';
import type { SourcePosition } from '../indexer/follower-types';

interface Followed {
  epoch: string;
  seq: number;
  /** Waiting for a snapshot of this epoch at or after this delta, after a gap or a late join. */
  needSnapshotFrom: number | undefined;
  /** Deltas received while waiting for the snapshot (bounded). */
  held: KvIndexDelta[];
  loading: boolean;
}

export interface KvIndexFeedOptions {
  /** Deltas held per source while its snapshot loads; past it the oldest are dropped (the next snapshot repairs). */
  readonly maxHeldDeltas?: number;
  /** Called with (ms from engine batch to applied) for each applied delta that carries the engine time. */
  readonly onLag?: (ms: number) => void;
}

export interface KvIndexFeedStats {
  deltas: number;
  gaps: number;
  snapshotsLoaded: number;
}

export interface KvIndexFeed {
  /** Resolves once the sources' snapshots that existed at start are loaded. */
  readonly synced: Promise<void>;
  readonly stats: KvIndexFeedStats;
  /** Each followed source's last applied delta (`/debug/kv-index`). */
  positions(): SourcePosition[];
  stop(): void;
}

/**
 * Keeps a {@link KvBlockIndex} equal to the indexers' view: applies `triad.v1.kvindex.delta` in order per source
 * and epoch, and loads a source from its KV snapshot when it joins late, when a new epoch starts without its
 * opening delta, or after a gap (core NATS can drop messages), then replays the deltas held since. A source's
 * `m.<source>` record sets whether it is live; its deletion drops the source.
 */
export async function startKvIndexFeed(bus: Bus, index: KvBlockIndex, options: KvIndexFeedOptions = {}): Promise<KvIndexFeed> {
  const metas = await bus.kv(Buckets.kvIndex, KvSourceMetaSchema);
  const chunks = await bus.kv(Buckets.kvIndex, KvSnapshotChunkSchema);
  const maxHeld = options.maxHeldDeltas ?? 10_000;
  const followed = new Map<string, Followed>();
  const latestMeta = new Map<string, KvSourceMeta>();
  const stats: KvIndexFeedStats = { deltas: 0, gaps: 0, snapshotsLoaded: 0 };

  const apply = (d: KvIndexDelta): void => {
    if (d.clear) index.clear(d.source);
    if (d.stored.length > 0) index.store(d.source, d.pod, d.stored);
    if (d.removed.length > 0) index.remove(d.source, d.removed);
    stats.deltas++;
    if (d.engineTs !== undefined) options.onLag?.(Date.now() - d.engineTs);
  };

  const hold = (f: Followed, d: KvIndexDelta): void => {
    f.held.push(d);
    if (f.held.length > maxHeld) f.held.shift();
  };

  const load = async (meta: KvSourceMeta): Promise<void> => {
    const f = followed.get(meta.source);
    if (!f || f.loading || f.needSnapshotFrom === undefined || meta.epoch !== f.epoch || meta.seq < f.needSnapshotFrom) return;
    f.loading = true;
    try {
      const keys = await readSnapshot(chunks, meta);
      if (keys === undefined || followed.get(meta.source) !== f) return;
      index.clear(meta.source);
      index.store(meta.source, meta.pod, keys);
      index.setLive(meta.source, meta.pod, meta.state === 'live');
      index.setGroups(meta.source, meta.pod, meta.groups);
      f.seq = meta.seq;
      f.needSnapshotFrom = undefined;
      stats.snapshotsLoaded++;
      const held = f.held.sort((a, b) => a.seq - b.seq);
      f.held = [];
      for (const d of held) deliver(d);
    } finally {
      f.loading = false;
    }
  };

  const deliver = (d: KvIndexDelta): void => {
    let f = followed.get(d.source);
    if (!f || f.epoch !== d.epoch) {
      f = { epoch: d.epoch, seq: -1, needSnapshotFrom: undefined, held: [], loading: false };
      followed.set(d.source, f);
      if (d.seq !== 0) {
        // Joined an epoch after its start: its blocks come from the snapshot, then the deltas after it.
        f.needSnapshotFrom = 0;
        hold(f, d);
        const meta = latestMeta.get(d.source);
        if (meta) void load(meta);
        return;
      }
    }
    if (f.needSnapshotFrom !== undefined) {
      hold(f, d);
      return;
    }
    if (d.seq <= f.seq) return;
    if (d.seq !== f.seq + 1) {
      stats.gaps++;
      f.needSnapshotFrom = f.seq + 1;
      hold(f, d);
      return;
    }
    f.seq = d.seq;
    apply(d);
  };

  const sub = bus.subscribe(Subjects.kvIndexDelta, KvIndexDeltaSchema, deliver);
  const watch: KvWatchHandle = await metas.watch({
    key: 'm.>',
    onChange: (change) => {
      if (change.op === 'DEL') {
        for (const source of [...latestMeta.keys()]) {
          if (kvSourceMetaKey(source) !== change.key) continue;
          latestMeta.delete(source);
          followed.delete(source);
          index.dropSource(source);
        }
        return;
      }
      const meta = change.value;
      latestMeta.set(meta.source, meta);
      let f = followed.get(meta.source);
      if (!f || (f.epoch !== meta.epoch && f.seq < 0 && f.needSnapshotFrom === undefined)) {
        f = { epoch: meta.epoch, seq: -1, needSnapshotFrom: 0, held: f?.held.filter((d) => d.epoch === meta.epoch) ?? [], loading: false };
        followed.set(meta.source, f);
      }
      if (f.epoch === meta.epoch) index.setLive(meta.source, meta.pod, meta.state === 'live');
      index.setGroups(meta.source, meta.pod, meta.groups);
      void load(meta);
    },
  });
  const synced = watch.synced.then(async () => {
    await Promise.all([...latestMeta.values()].map((m) => load(m)));
  });
  return {
    synced,
    stats,
    positions: () =>
      [...followed].map(([source, f]) => ({
        source,
        pod: latestMeta.get(source)?.pod,
        epoch: f.epoch,
        seq: f.seq,
        blocks: index.blockCount(source),
        loading: f.needSnapshotFrom !== undefined,
      })),
    stop: () => {
      watch.stop();
      sub.unsubscribe();
    },
  };
}

/** The snapshot's keys, or undefined when a chunk is missing or belongs to another snapshot (overwritten meanwhile). */
async function readSnapshot(chunks: TypedKv<typeof KvSnapshotChunkSchema>, meta: KvSourceMeta): Promise<string[] | undefined> {
  const keys: string[] = [];
  for (let i = 0; i < meta.chunks; i++) {
    const chunk = await chunks.get(kvSnapshotChunkKey(meta.source, i));
    if (!chunk || chunk.snapshotId !== meta.snapshotId) return undefined;
    keys.push(...chunk.keys);
  }
  return keys;
}
