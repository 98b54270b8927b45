/** What a follower reports about its source's blocks: applied in order by the NATS publisher. */
export interface SourceDelta {
  readonly clear: boolean;
  readonly stored: readonly string[];
  readonly removed: readonly string[];
  /** Engine batch time, ms since the epoch. */
  readonly engineTs: number | undefined;
}

/**
 * Where a source stands in its delta stream: the indexer's last published delta, or a scheduler's last applied
 * one. Equal epoch and seq on both sides mean the scheduler's view of the source has caught up with the indexer.
 */
export interface SourcePosition {
  readonly source: string;
  readonly pod: string | undefined;
  readonly epoch: string;
  readonly seq: number;
  readonly blocks: number;
  /** Scheduler side: waiting for a snapshot (after a gap or a late join), so `seq` is behind on purpose. */
  readonly loading?: boolean;
}

/** Receives a follower's changes. */
export interface FollowerSink {
  delta(source: string, pod: string, delta: SourceDelta): void;
  /** The source became usable (`live`) or not; `reason` says why not. */
  state(source: string, pod: string, live: boolean, reason: string | undefined): void;
}

/** Things worth counting per pod (`triad_kv_indexer_<name>_total{pod}`). */
export type FollowerCounter =
  | 'batches'
  | 'events'
  | 'malformed'
  | 'unknown_events'
  | 'ignored_events'
  | 'gaps'
  | 'replays'
  | 'replay_failures'
  | 'resyncs'
  | 'restarts'
  | 'floods'
  | 'flood_dropped'
  | 'connect_failures'
  | 'evicted_blocks';

export interface FollowerMetrics {
  inc(counter: FollowerCounter, pod: string, n?: number): void;
}

export interface FollowerLogger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
}

export interface FollowerLimits {
  /** Blocks remembered per source (snapshots, restarts); the least recently stored go first. Default 1 000 000. */
  readonly maxBlocks?: number;
  /** Blocks per second a source may store or remove before it is treated as flooding. Default 500 000. */
  readonly maxBlocksPerSecond?: number;
  /** How long a flooding source is ignored before it is followed again from scratch. Default 10 000 ms. */
  readonly floodCooldownMs?: number;
  /** A source whose socket has not connected by then is reported down (it keeps trying). Default 5 000 ms. */
  readonly connectTimeoutMs?: number;
  /** Live messages kept while a replay is under way; past it the follower resyncs. Default 10 000. */
  readonly maxPendingMessages?: number;
}
