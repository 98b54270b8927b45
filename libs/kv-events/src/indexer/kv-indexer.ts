import { Buckets, EndpointRecordSchema, KvIndexerHeartbeatSchema, SCHEMA_VERSION, type EndpointRecord } from '@triad/bus';
import type { Bus, KvWatchHandle } from '@triad/bus/client';
import type { FollowerLimits, FollowerLogger, FollowerMetrics } from './follower-types';
import { IndexPublisher } from './index-publisher';
import { rendezvousOwner } from '@triad/scheduling/hashing';
import { SourceFollower } from './source-follower';
import { sourcesOf, type SourceSpec } from './sources';

export interface KvIndexerOptions {
  readonly bus: Bus;
  /** This replica's name in the membership bucket. */
  readonly instanceId: string;
  readonly logger: FollowerLogger;
  readonly metrics: FollowerMetrics;
  readonly limits?: FollowerLimits;
  readonly snapshotIntervalMs?: number;
  /** Heartbeat period; a replica silent for 3 periods leaves the membership. Default 1000 ms. */
  readonly heartbeatMs?: number;
}

/**
 * One KV indexer replica: follows the event sockets that endpoint records name (pod annotations published by the
 * pod-watcher), but only the sources rendezvous hashing over the live replicas gives it, and publishes their
 * blocks through an {@link IndexPublisher}. Replicas announce themselves in `triad_v1_kvindexers`; when one joins
 * or goes silent, the others take up or hand over sources (a taken-over source starts a new epoch).
 */
export class KvIndexer {
  readonly #o: KvIndexerOptions;
  readonly publisher: IndexPublisher;
  readonly #specs = new Map<string, SourceSpec>();
  readonly #followers = new Map<string, { spec: SourceSpec; follower: SourceFollower }>();
  readonly #members = new Map<string, number>();
  readonly #records = new Map<string, EndpointRecord>();
  #watches: KvWatchHandle[] = [];
  #beat: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(options: KvIndexerOptions) {
    this.#o = options;
    this.publisher = new IndexPublisher(options.bus, {
      indexerId: options.instanceId,
      logger: options.logger,
      ...(options.snapshotIntervalMs ? { snapshotIntervalMs: options.snapshotIntervalMs } : {}),
    });
  }

  /** Sources this replica follows now. */
  get following(): readonly string[] {
    return [...this.#followers.keys()];
  }

  followerOf(source: string): SourceFollower | undefined {
    return this.#followers.get(source)?.follower;
  }

  async start(): Promise<void> {
    await this.publisher.start();
    const beats = await this.#o.bus.kv(Buckets.kvIndexers, KvIndexerHeartbeatSchema);
    const period = this.#o.heartbeatMs ?? 1000;
    const beat = (): void => {
      void beats.put(this.#o.instanceId, { v: SCHEMA_VERSION, id: this.#o.instanceId, at: Date.now() }).catch(() => undefined);
      this.#reconcile();
    };
    this.#members.set(this.#o.instanceId, Date.now());
    this.#watches.push(
      await beats.watch({
        onChange: (c) => {
          if (c.op === 'PUT') this.#members.set(c.value.id, c.value.at);
          else this.#members.delete(c.key);
          this.#reconcile();
        },
      }),
    );
    const endpoints = await this.#o.bus.kv(Buckets.endpoints, EndpointRecordSchema);
    const watch = await endpoints.watch({
      onChange: (c) => {
        if (c.op === 'PUT') this.#records.set(c.key, c.value);
        else this.#records.delete(c.key);
        this.#reconcile();
      },
    });
    this.#watches.push(watch);
    await watch.synced;
    beat();
    this.#beat = setInterval(beat, period);
    this.#beat.unref();
  }

  #liveMembers(): string[] {
    const cutoff = Date.now() - 3 * (this.#o.heartbeatMs ?? 1000);
    this.#members.set(this.#o.instanceId, Date.now());
    return [...this.#members].filter(([, at]) => at >= cutoff).map(([id]) => id);
  }

  #reconcile(): void {
    if (this.#closed) return;
    this.#specs.clear();
    for (const record of this.#records.values()) for (const spec of sourcesOf(record)) this.#specs.set(spec.source, spec);
    const members = this.#liveMembers();
    for (const [source, { spec, follower }] of this.#followers) {
      const want = this.#specs.get(source);
      const mine = want !== undefined && rendezvousOwner(source, members) === this.#o.instanceId;
      if (mine && want.endpoint === spec.endpoint && want.replayEndpoint === spec.replayEndpoint) continue;
      follower.close();
      this.#followers.delete(source);
      this.publisher.detach(source, want === undefined);
      this.#o.logger.info(
        { source, reason: want === undefined ? 'pod gone' : mine ? 'endpoint changed' : 'handed over' },
        'stopped following KV events',
      );
    }
    for (const [source, spec] of this.#specs) {
      if (this.#followers.has(source) || rendezvousOwner(source, members) !== this.#o.instanceId) continue;
      this.#follow(spec);
    }
  }

  #follow(spec: SourceSpec): void {
    const holder: { follower?: SourceFollower } = {};
    const view = {
      get blocks() {
        return holder.follower?.blocks ?? new Set<string>();
      },
      get blockSize() {
        return holder.follower?.blockSize;
      },
      get groups() {
        return holder.follower?.groups ?? new Map();
      },
      get live() {
        return holder.follower?.live ?? false;
      },
      get reason() {
        return holder.follower?.reason;
      },
    };
    this.publisher.attach(spec.source, spec.pod, view);
    holder.follower = new SourceFollower({
      ...spec,
      sink: this.publisher,
      metrics: this.#o.metrics,
      logger: this.#o.logger,
      ...(this.#o.limits ? { limits: this.#o.limits } : {}),
    });
    this.#followers.set(spec.source, { spec, follower: holder.follower });
    this.#o.logger.info({ source: spec.source, endpoint: spec.endpoint, replay: spec.replayEndpoint }, 'following KV events');
  }

  async close(): Promise<void> {
    this.#closed = true;
    if (this.#beat) clearInterval(this.#beat);
    for (const w of this.#watches) w.stop();
    for (const { follower } of this.#followers.values()) follower.close();
    this.#followers.clear();
    await this.publisher.close();
  }
}
