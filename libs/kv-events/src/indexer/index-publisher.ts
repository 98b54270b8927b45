import { randomUUID } from 'node:crypto';
import {
  Buckets,
  KvIndexDeltaSchema,
  KvIndexLimits,
  KvSnapshotChunkSchema,
  KvSourceMetaSchema,
  SCHEMA_VERSION,
  Subjects,
  kvSnapshotChunkKey,
  kvSourceMetaKey,
  type KvGroupSpec,
  type KvSourceMeta,
} from '@triad/bus';
import type { Bus, TypedKv } from '@triad/bus/client';
import type { FollowerLogger, FollowerSink, SourceDelta, SourcePosition } from './follower-types';

/** What the publisher reads from a follower when it writes a snapshot. */
export interface SnapshotSource {
  readonly blocks: ReadonlySet<string>;
  readonly blockSize: number | undefined;
  readonly groups: ReadonlyMap<number, KvGroupSpec>;
  readonly live: boolean;
  readonly reason: string | undefined;
}

interface Published {
  readonly pod: string;
  readonly epoch: string;
  readonly follower: SnapshotSource;
  seq: number;
  dirty: boolean;
  snapshotId: string;
  snapshotSeq: number;
  chunks: number;
  blocks: number;
}

export interface IndexPublisherOptions {
  readonly indexerId: string;
  /** How often changed sources get a new snapshot in KV (what late schedulers and gap recovery load). */
  readonly snapshotIntervalMs?: number;
  readonly logger: FollowerLogger;
}

/**
 * Puts followers' changes on NATS: each delta on `triad.v1.kvindex.delta` (per source, numbered within an epoch
 * that starts with a clearing delta when the indexer starts following the source), and, every
 * `snapshotIntervalMs` for sources that changed, the source's blocks as chunks plus its `m.<source>` record in
 * the `triad_v1_kvindex` bucket. State changes (live/down) rewrite the record at once.
 */
export class IndexPublisher implements FollowerSink {
  readonly #bus: Bus;
  readonly #o: IndexPublisherOptions;
  readonly #sources = new Map<string, Published>();
  #metas!: TypedKv<typeof KvSourceMetaSchema>;
  #chunks!: TypedKv<typeof KvSnapshotChunkSchema>;
  #timer: NodeJS.Timeout | undefined;
  #writing: Promise<void> = Promise.resolve();

  constructor(bus: Bus, options: IndexPublisherOptions) {
    this.#bus = bus;
    this.#o = options;
  }

  async start(): Promise<void> {
    this.#metas = await this.#bus.kv(Buckets.kvIndex, KvSourceMetaSchema);
    this.#chunks = await this.#bus.kv(Buckets.kvIndex, KvSnapshotChunkSchema);
    this.#timer = setInterval(() => this.#snapshotDirty(), this.#o.snapshotIntervalMs ?? 2_000);
    this.#timer.unref();
  }

  /** Starts publishing a source (a new epoch whose first delta clears it). Call before the follower emits. */
  attach(source: string, pod: string, follower: SnapshotSource): void {
    const p: Published = { pod, epoch: randomUUID(), follower, seq: -1, dirty: true, snapshotId: '', snapshotSeq: 0, chunks: 0, blocks: 0 };
    this.#sources.set(source, p);
    this.#publish(source, p, { clear: true, stored: [], removed: [], engineTs: undefined });
  }

  /** Stops publishing a source; with `forget`, deletes its KV state too (its pod is gone). */
  detach(source: string, forget: boolean): void {
    const p = this.#sources.get(source);
    this.#sources.delete(source);
    if (!forget || !p) return;
    this.#queue(async () => {
      await this.#metas.delete(kvSourceMetaKey(source));
      for (let i = 0; i < p.chunks; i++) await this.#chunks.delete(kvSnapshotChunkKey(source, i));
    });
  }

  delta(source: string, _pod: string, d: SourceDelta): void {
    const p = this.#sources.get(source);
    if (!p) return;
    const max = KvIndexLimits.maxKeysPerDelta;
    if (d.stored.length <= max && d.removed.length <= max) {
      this.#publish(source, p, d);
      return;
    }
    // A huge batch goes out in pieces; only the first carries `clear`.
    for (let i = 0; i < Math.max(d.stored.length, d.removed.length); i += max) {
      this.#publish(source, p, {
        clear: d.clear && i === 0,
        stored: d.stored.slice(i, i + max),
        removed: d.removed.slice(i, i + max),
        engineTs: d.engineTs,
      });
    }
  }

  /** Each source's last published delta (`/debug/kv-index`). */
  positions(): SourcePosition[] {
    return [...this.#sources].map(([source, p]) => ({ source, pod: p.pod, epoch: p.epoch, seq: p.seq, blocks: p.follower.blocks.size }));
  }

  state(source: string): void {
    const p = this.#sources.get(source);
    if (p) this.#queue(() => this.#writeMeta(source, p));
  }

  #publish(source: string, p: Published, d: SourceDelta): void {
    p.seq++;
    p.dirty = true;
    this.#bus.publish(Subjects.kvIndexDelta, KvIndexDeltaSchema, {
      v: SCHEMA_VERSION,
      source,
      pod: p.pod,
      epoch: p.epoch,
      seq: p.seq,
      ...(d.clear ? { clear: true } : {}),
      stored: [...d.stored],
      removed: [...d.removed],
      ...(d.engineTs !== undefined ? { engineTs: d.engineTs } : {}),
      publishedAt: Date.now(),
    });
  }

  #snapshotDirty(): void {
    for (const [source, p] of this.#sources) {
      if (!p.dirty) continue;
      p.dirty = false;
      this.#queue(() => this.#writeSnapshot(source, p));
    }
  }

  /** Writes `p`'s snapshot now (tests; the interval does it otherwise). */
  async flushSnapshots(): Promise<void> {
    this.#snapshotDirty();
    await this.#writing;
  }

  async #writeSnapshot(source: string, p: Published): Promise<void> {
    const keys = [...p.follower.blocks];
    const seq = p.seq;
    const snapshotId = randomUUID();
    const max = KvIndexLimits.maxKeysPerChunk;
    const chunks = Math.ceil(keys.length / max);
    for (let i = 0; i < chunks; i++) {
      await this.#chunks.put(kvSnapshotChunkKey(source, i), { v: SCHEMA_VERSION, snapshotId, keys: keys.slice(i * max, (i + 1) * max) });
    }
    const stale = p.chunks;
    Object.assign(p, { snapshotId, snapshotSeq: seq, chunks, blocks: keys.length });
    await this.#writeMeta(source, p);
    for (let i = chunks; i < stale; i++) await this.#chunks.delete(kvSnapshotChunkKey(source, i));
  }

  async #writeMeta(source: string, p: Published): Promise<void> {
    if (this.#sources.get(source) !== p) return;
    const f = p.follower;
    const meta: KvSourceMeta = {
      v: SCHEMA_VERSION,
      source,
      pod: p.pod,
      epoch: p.epoch,
      seq: p.snapshotSeq,
      state: f.live ? 'live' : 'down',
      ...(f.reason !== undefined && !f.live ? { reason: f.reason } : {}),
      ...(f.blockSize !== undefined ? { blockSize: f.blockSize } : {}),
      ...(hybrid(f.groups) ? { groups: [...f.groups.values()].sort((a, b) => a.idx - b.idx) } : {}),
      snapshotId: p.snapshotId,
      chunks: p.chunks,
      blocks: p.blocks,
      indexer: this.#o.indexerId,
      updatedAt: Date.now(),
    };
    await this.#metas.put(kvSourceMetaKey(source), meta);
  }

  #queue(work: () => Promise<void>): void {
    this.#writing = this.#writing
      .then(work)
      .catch((err: unknown) => this.#o.logger.warn({ err: (err as Error).message }, 'KV index snapshot write failed'));
  }

  async close(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    await this.#writing;
  }
}

/** Groups worth publishing: more than group 0, or a group whose kind the engine named. */
function hybrid(groups: ReadonlyMap<number, KvGroupSpec>): boolean {
  if (groups.size > 1) return true;
  for (const g of groups.values()) if (g.kind !== undefined && g.kind !== 'full_attention') return true;
  return false;
}
