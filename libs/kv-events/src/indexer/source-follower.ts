import type { KvGroupSpec } from '@triad/bus';
import { groupKey } from '../hashing/block-key';
import { decodeKvEventBatch } from '../wire/decode-batch';
import { EventStream, type StreamMessage } from '../zmq/event-stream';
import type { FollowerLimits, FollowerLogger, FollowerMetrics, FollowerSink } from './follower-types';

export interface SourceFollowerOptions {
  /** `namespace/pod`, with `#rank` above rank 0. */
  readonly source: string;
  /** `namespace/pod`. */
  readonly pod: string;
  readonly endpoint: string;
  readonly replayEndpoint?: string | undefined;
  readonly topic?: string;
  readonly sink: FollowerSink;
  readonly metrics: FollowerMetrics;
  readonly logger: FollowerLogger;
  readonly limits?: FollowerLimits;
  /** Clock, ms (tests). */
  readonly now?: () => number;
}

type Pending = { seq: number; payload: Buffer };

/**
 * Follows one engine's KV-event socket and turns its batches into block deltas, keeping the source's blocks
 * exact across what the transport loses:
 * - a sequence gap → replay from the first missing batch through the replay socket; when the replay cannot cover
 *   it (no replay socket, the buffer moved on, no answer), a full resync: the source is cleared and followed
 *   from the next batch (its older blocks are unknown, so they are not claimed);
 * - a sequence that goes backwards, or AllBlocksCleared → the engine restarted or dropped its cache: clear;
 * - joining a running engine → replay from 0 (whatever the engine still buffers);
 * - malformed payloads and unknown event types are skipped and counted; floods (more blocks per second than
 *   `maxBlocksPerSecond`) take the source down for a cool-down, then it is followed from scratch.
 * Each kind of problem is logged once per source with its reason. The blocks it holds are capped (`maxBlocks`).
 */
export class SourceFollower {
  readonly source: string;
  readonly pod: string;
  /** The source's blocks (group keys, see `groupKey`), least recently stored first (what snapshots publish). */
  readonly blocks = new Set<string>();
  /** Tokens per block of KV-cache group 0. */
  blockSize: number | undefined;
  /** The engine's KV-cache groups as its BlockStored events describe them (hybrid models have several). */
  readonly groups = new Map<number, KvGroupSpec>();
  live = false;
  reason: string | undefined = 'not connected yet';
  readonly #o: SourceFollowerOptions;
  readonly #stream: EventStream;
  readonly #now: () => number;
  readonly #maxBlocks: number;
  readonly #maxRate: number;
  readonly #cooldownMs: number;
  readonly #maxPending: number;
  readonly #warned = new Set<string>();
  #expected: number | undefined;
  #pending: Pending[] | undefined;
  #connected = false;
  #connectTimer: NodeJS.Timeout | undefined;
  #rateWindowStart = 0;
  #rateCount = 0;
  #floodUntil = 0;
  #closed = false;

  constructor(options: SourceFollowerOptions) {
    this.#o = options;
    this.source = options.source;
    this.pod = options.pod;
    this.#now = options.now ?? Date.now;
    const l = options.limits ?? {};
    this.#maxBlocks = l.maxBlocks ?? 1_000_000;
    this.#maxRate = l.maxBlocksPerSecond ?? 500_000;
    this.#cooldownMs = l.floodCooldownMs ?? 10_000;
    this.#maxPending = l.maxPendingMessages ?? 10_000;
    this.#stream = new EventStream(
      { endpoint: options.endpoint, replayEndpoint: options.replayEndpoint, topic: options.topic ?? '' },
      { onMessage: (m) => this.#onMessage(m), onMalformed: (why) => this.#malformed(why), onConnection: (up) => this.#onConnection(up) },
    );
    this.#connectTimer = setTimeout(() => {
      if (this.#connected || this.#closed) return;
      options.metrics.inc('connect_failures', this.pod);
      this.#warnOnce(
        'connect',
        { endpoint: options.endpoint },
        `cannot connect to the KV-event socket ${options.endpoint}; the pod is scored by the approximate prefix scorer`,
      );
      this.#setState(false, `cannot connect to ${options.endpoint}`);
    }, l.connectTimeoutMs ?? 5_000);
    this.#connectTimer.unref();
  }

  #onConnection(up: boolean): void {
    this.#connected = up;
    if (up) {
      if (this.#now() >= this.#floodUntil) this.#setState(true, undefined);
    } else {
      this.#setState(false, `disconnected from ${this.#o.endpoint}`);
    }
  }

  #onMessage(m: StreamMessage): void {
    if (this.#closed) return;
    let fresh = false;
    if (this.#floodUntil > 0) {
      if (this.#now() < this.#floodUntil) {
        this.#o.metrics.inc('flood_dropped', this.pod);
        return;
      }
      this.#floodUntil = 0;
      this.#expected = undefined;
      // From scratch: a replay would feed the flood back in, so the source starts over at this message.
      fresh = true;
      if (this.#connected) this.#setState(true, undefined);
    }
    if (this.#pending) {
      if (this.#pending.length >= this.#maxPending) this.#pending.shift();
      this.#pending.push({ seq: m.seq, payload: m.payload });
      return;
    }
    const expected = this.#expected;
    if (expected === undefined) {
      if (m.seq === 0 || fresh || !this.#stream.canReplay) this.#apply(m.seq, m.payload);
      else this.#startReplay(0, m);
    } else if (m.seq === expected) {
      this.#apply(m.seq, m.payload);
    } else if (m.seq > expected) {
      this.#o.metrics.inc('gaps', this.pod);
      this.#warnOnce('gap', { expected, got: m.seq }, 'KV-event sequence gap; replaying the missed batches');
      if (this.#stream.canReplay) this.#startReplay(expected, m);
      else this.#resync(`sequence gap ${expected}→${m.seq} and no replay socket`, m);
    } else {
      // The engine's sequence restarted: a new process with an empty cache.
      this.#o.metrics.inc('restarts', this.pod);
      this.#o.logger.info(
        { source: this.source, expected, got: m.seq },
        'KV-event sequence restarted (engine restart); clearing the source',
      );
      this.#clear();
      this.#expected = undefined;
      if (m.seq === 0 || !this.#stream.canReplay) this.#apply(m.seq, m.payload);
      else this.#startReplay(0, m);
    }
  }

  #startReplay(from: number, first: StreamMessage): void {
    this.#pending = [{ seq: first.seq, payload: first.payload }];
    this.#o.metrics.inc('replays', this.pod);
    void this.#stream.replay(from).then((result) => {
      if (this.#closed) return;
      const pending = this.#pending ?? [];
      this.#pending = undefined;
      if (!result.ok) {
        this.#o.metrics.inc('replay_failures', this.pod);
        this.#warnOnce('replay', { reason: result.reason }, 'KV-event replay failed; resyncing the source');
        this.#clearAndFollow(pending);
        return;
      }
      const replayed = result.messages;
      if (from > 0 && (replayed.length === 0 || replayed[0].seq > from)) {
        // The replay buffer no longer reaches back to the first missed batch: what happened in between is lost.
        this.#warnOnce(
          'replay-short',
          { from, oldest: replayed[0]?.seq },
          'KV-event replay buffer does not reach the gap; resyncing the source',
        );
        this.#clearAndFollow([...replayed, ...pending]);
        return;
      }
      if (from === 0 && this.#expected === undefined) this.#expected = replayed[0]?.seq;
      for (const msg of [...replayed, ...pending]) this.#applyInOrder(msg);
    });
  }

  /** Applies a message if it is the next one (replayed and buffered messages overlap). */
  #applyInOrder(msg: Pending): void {
    if (this.#expected !== undefined && msg.seq < this.#expected) return;
    this.#apply(msg.seq, msg.payload);
  }

  #resync(why: string, next: StreamMessage): void {
    this.#warnOnce('resync', { why }, 'KV-event source resynced; its earlier blocks are forgotten');
    this.#clearAndFollow([{ seq: next.seq, payload: next.payload }]);
  }

  #clearAndFollow(messages: readonly Pending[]): void {
    this.#o.metrics.inc('resyncs', this.pod);
    this.#clear();
    this.#expected = undefined;
    for (const msg of messages) {
      if (this.#expected === undefined) this.#expected = msg.seq;
      this.#applyInOrder(msg);
    }
  }

  #clear(): void {
    this.blocks.clear();
    this.#o.sink.delta(this.source, this.pod, { clear: true, stored: [], removed: [], engineTs: undefined });
  }

  #apply(seq: number, payload: Buffer): void {
    this.#expected = seq + 1;
    let batch;
    try {
      batch = decodeKvEventBatch(payload);
    } catch (err) {
      this.#malformed((err as Error).message);
      return;
    }
    this.#o.metrics.inc('batches', this.pod);
    let clear = false;
    let stored: string[] = [];
    let removed: string[] = [];
    const flush = (): void => {
      if (!clear && stored.length === 0 && removed.length === 0) return;
      this.#o.sink.delta(this.source, this.pod, { clear, stored, removed, engineTs: batch.ts * 1000 });
      clear = false;
      stored = [];
      removed = [];
    };
    let blocks = 0;
    let groupsChanged = false;
    for (const e of batch.events) {
      this.#o.metrics.inc('events', this.pod);
      if (e.type === 'unknown') {
        this.#o.metrics.inc('unknown_events', this.pod);
        this.#warnOnce(`unknown:${e.tag}`, { tag: e.tag }, 'unknown KV event type skipped');
      } else if (e.type === 'cleared') {
        stored = [];
        removed = [];
        this.blocks.clear();
        clear = true;
      } else if (e.medium !== undefined && e.medium.toUpperCase() !== 'GPU') {
        // Offloaded tiers (CPU, storage) are not what a prefill reads directly; only GPU blocks are indexed.
        this.#o.metrics.inc('ignored_events', this.pod);
      } else if (e.type === 'stored') {
        if (e.group === 0) this.blockSize = e.blockSize;
        groupsChanged = this.#learnGroup(e) || groupsChanged;
        blocks += e.hashes.length;
        for (const hash of e.hashes) {
          // A block of one group is not the same block of another group, though vLLM gives both the same hash.
          const key = groupKey(hash, e.group);
          this.blocks.delete(key);
          this.blocks.add(key);
          stored.push(key);
        }
      } else {
        blocks += e.hashes.length;
        for (const hash of e.hashes) {
          const key = groupKey(hash, e.group);
          if (this.blocks.delete(key)) removed.push(key);
        }
      }
    }
    if (this.#flooding(blocks)) return;
    this.#trim(removed);
    flush();
    // The index needs each group's block size to match them: republish the source's record.
    if (groupsChanged) this.#o.sink.state(this.source, this.pod, this.live, this.reason);
  }

  /** Records what a BlockStored event says of its group; true when that is news. */
  #learnGroup(e: { group: number; blockSize: number; kind: string | undefined; slidingWindow: number | undefined }): boolean {
    const known = this.groups.get(e.group);
    const kind = e.kind ?? known?.kind;
    const slidingWindow = e.slidingWindow ?? known?.slidingWindow;
    if (known && known.blockSize === e.blockSize && known.kind === kind && known.slidingWindow === slidingWindow) return false;
    this.groups.set(e.group, {
      idx: e.group,
      blockSize: e.blockSize,
      ...(kind !== undefined ? { kind } : {}),
      ...(slidingWindow !== undefined ? { slidingWindow } : {}),
    });
    return true;
  }

  /** Over `maxBlocks`: the least recently stored blocks are dropped, and reported as removed. */
  #trim(removed: string[]): void {
    let over = this.blocks.size - this.#maxBlocks;
    if (over <= 0) return;
    this.#o.metrics.inc('evicted_blocks', this.pod, over);
    for (const key of this.blocks) {
      if (over-- <= 0) break;
      this.blocks.delete(key);
      removed.push(key);
    }
  }

  #flooding(blocks: number): boolean {
    const now = this.#now();
    if (now - this.#rateWindowStart >= 1000) {
      this.#rateWindowStart = now;
      this.#rateCount = 0;
    }
    this.#rateCount += blocks;
    if (this.#rateCount <= this.#maxRate) return false;
    this.#o.metrics.inc('floods', this.pod);
    this.#warnOnce('flood', { blocksPerSecond: this.#rateCount, limit: this.#maxRate }, 'KV-event source floods; ignoring it for a while');
    this.#floodUntil = now + this.#cooldownMs;
    this.#rateCount = 0;
    this.#clear();
    this.#setState(false, `more than ${this.#maxRate} blocks/s`);
    return true;
  }

  #malformed(why: string): void {
    this.#o.metrics.inc('malformed', this.pod);
    this.#warnOnce('malformed', { why }, 'malformed KV-event message skipped');
  }

  #warnOnce(kind: string, fields: object, msg: string): void {
    if (this.#warned.has(kind)) return;
    this.#warned.add(kind);
    this.#o.logger.warn({ source: this.source, pod: this.pod, ...fields }, msg);
  }

  #setState(live: boolean, reason: string | undefined): void {
    if (this.live === live && this.reason === reason) return;
    this.live = live;
    this.reason = reason;
    this.#o.sink.state(this.source, this.pod, live, reason);
  }

  close(): void {
    this.#closed = true;
    if (this.#connectTimer) clearTimeout(this.#connectTimer);
    this.#stream.close();
  }
}
