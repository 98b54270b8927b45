import { PodWatcherHeartbeatSchema, SCHEMA_VERSION, Subjects } from '@triad/bus';
import type { Bus } from '@triad/bus/client';
import type { Logger } from '@triad/runtime';

export interface MembershipOptions {
  readonly bus: Bus;
  /** The watched scope (the writer lease's key): only replicas of the same scope share the work. */
  readonly scope: string;
  readonly identity: string;
  /** Heartbeat period; a replica not heard for three periods is gone. */
  readonly heartbeatMs: number;
  readonly logger: Logger;
  /** The live members (this replica included, sorted) changed. */
  readonly onChange: (members: readonly string[]) => void;
  readonly now?: () => number;
}

/** Heartbeats missed before a replica counts as gone. */
const MISSED = 3;

/**
 * The live pod-watcher replicas of one scope, from heartbeats on core NATS (no JetStream: membership must work
 * while a JetStream leader is being elected). Each replica publishes one every `heartbeatMs`; one not heard for
 * three periods is dropped (its share moves within about 3 s), one that says `leaving` at once. A newcomer says
 * `hello` and every member answers at once, so it learns the members within a round trip. Without NATS a replica
 * hears nobody and, after the timeout, owns everything: it scrapes more, never less.
 */
export class ShardMembership {
  readonly #opts: MembershipOptions;
  readonly #now: () => number;
  readonly #subject: string;
  readonly #lastSeen = new Map<string, number>();
  #members: readonly string[];
  #sub: ReturnType<Bus['subscribe']> | undefined;
  #timer: NodeJS.Timeout | undefined;

  constructor(options: MembershipOptions) {
    this.#opts = options;
    this.#now = options.now ?? Date.now;
    this.#subject = `${Subjects.podWatcherHeartbeat}.${options.scope.replace(/[^A-Za-z0-9_-]/g, '_')}`;
    this.#members = [options.identity];
  }

  get members(): readonly string[] {
    return this.#members;
  }

  start(): void {
    const { bus, identity } = this.#opts;
    this.#sub = bus.subscribe(this.#subject, PodWatcherHeartbeatSchema, (hb) => {
      if (hb.id === identity) return;
      if (hb.leaving) {
        this.#lastSeen.delete(hb.id);
      } else {
        this.#lastSeen.set(hb.id, this.#now());
        if (hb.hello) this.#beat(false);
      }
      this.#update();
    });
    this.#beat(true);
    this.#timer = setInterval(() => {
      this.#beat(false);
      this.#update();
    }, this.#opts.heartbeatMs);
    this.#timer.unref?.();
  }

  /** Says goodbye (the others take over at once) and stops. */
  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
    if (!this.#opts.bus.nc.isClosed()) this.#publish({ leaving: true });
    this.#sub?.unsubscribe();
    this.#sub = undefined;
  }

  #beat(hello: boolean): void {
    if (this.#opts.bus.nc.isClosed()) return;
    this.#publish(hello ? { hello: true } : {});
  }

  #publish(extra: { hello?: boolean; leaving?: boolean }): void {
    try {
      this.#opts.bus.publish(this.#subject, PodWatcherHeartbeatSchema, { v: SCHEMA_VERSION, id: this.#opts.identity, ...extra });
    } catch (err) {
      this.#opts.logger.debug({ err: (err as Error).message }, 'heartbeat not sent');
    }
  }

  #update(): void {
    const horizon = this.#now() - MISSED * this.#opts.heartbeatMs;
    for (const [id, at] of this.#lastSeen) if (at < horizon) this.#lastSeen.delete(id);
    const next = [this.#opts.identity, ...this.#lastSeen.keys()].sort();
    if (next.length === this.#members.length && next.every((m, i) => m === this.#members[i])) return;
    const before = this.#members;
    this.#members = next;
    this.#opts.logger.info({ members: next, before }, 'scrape shard members changed');
    this.#opts.onChange(next);
  }
}
