import { ZmqEventPublisher, encodeKvEventBatch, type KvEventOut } from '@triad/kv-events';
import type { Rank } from '../engine/rank';
import type { EngineKind, KvEventsSimOptions } from '../options';
import { SimBlockHashing } from './block-hashing';
import { TokenPrefixCache, type KvEventEmitter } from './token-prefix-cache';

/**
 * A bind address with `*` for the host and the port moved by `offset`, as vLLM and SGLang offset a DP rank's
 * endpoint (`tcp://*:5557` → `tcp://<host>:5558` for rank 1). Port `*` or 0 picks a free port per rank.
 */
export function rankBindAddress(endpoint: string, host: string, offset: number): string {
  const m = /^tcp:\/\/(\*|\[[^\]]+\]|[^:/]*):(\*|\d+)$/.exec(endpoint.trim());
  if (!m) throw new Error(`kvEvents endpoint ${JSON.stringify(endpoint)} is not tcp://HOST:PORT`);
  const raw = m[1] === '*' || m[1] === '' ? host : m[1];
  const bindHost = raw.includes(':') && !raw.startsWith('[') ? `[${raw}]` : raw;
  const port = m[2] === '*' || m[2] === '0' ? '*' : String(Number(m[2]) + offset);
  if (port !== '*' && Number(port) > 65535) throw new Error(`kvEvents endpoint ${endpoint}: no port left for DP rank ${offset}`);
  return `tcp://${bindHost}:${port}`;
}

/** One rank's publisher: the events of an event-loop turn go out as one batch (one engine step). */
class RankEvents implements KvEventEmitter {
  readonly #publisher: ZmqEventPublisher;
  readonly #form: EngineKind;
  readonly #rank: number;
  #pending: KvEventOut[] = [];
  #scheduled: NodeJS.Immediate | undefined;

  constructor(publisher: ZmqEventPublisher, form: EngineKind, rank: number) {
    this.#publisher = publisher;
    this.#form = form;
    this.#rank = rank;
  }

  get publisher(): ZmqEventPublisher {
    return this.#publisher;
  }

  emit(event: KvEventOut): void {
    this.#pending.push(event);
    this.#scheduled ??= setImmediate(() => this.flush());
  }

  flush(): void {
    if (this.#scheduled) clearImmediate(this.#scheduled);
    this.#scheduled = undefined;
    if (this.#pending.length === 0) return;
    const events = this.#pending;
    this.#pending = [];
    void this.#publisher.publish(encodeKvEventBatch(this.#form, Date.now() / 1000, events, this.#rank));
  }

  /** A restarted process: nothing pending survives, and the sequence and replay buffer start over. */
  restart(): void {
    if (this.#scheduled) clearImmediate(this.#scheduled);
    this.#scheduled = undefined;
    this.#pending = [];
    this.#publisher.resetSequence();
  }
}

/**
 * The KV-event side of a simulated engine: one PUB socket (and replay ROUTER) per DP rank on the configured
 * endpoint + rank, and each rank's prefix cache replaced by a {@link TokenPrefixCache} that publishes through it.
 */
export class SimKvEvents {
  readonly #ranks: { events: RankEvents; cache: TokenPrefixCache }[];
  readonly hashing: SimBlockHashing;

  private constructor(ranks: { events: RankEvents; cache: TokenPrefixCache }[], hashing: SimBlockHashing) {
    this.#ranks = ranks;
    this.hashing = hashing;
  }

  static async start(
    engine: EngineKind,
    options: KvEventsSimOptions,
    host: string,
    model: string,
    ranks: readonly Rank[],
    capacityTokens: number,
  ): Promise<SimKvEvents> {
    const hashing = new SimBlockHashing(engine, options, model);
    const started: { events: RankEvents; cache: TokenPrefixCache }[] = [];
    try {
      for (const rank of ranks) {
        const publisher = await ZmqEventPublisher.start({
          endpoint: rankBindAddress(options.endpoint, host, rank.index),
          ...(options.replayEndpoint ? { replayEndpoint: rankBindAddress(options.replayEndpoint, host, rank.index) } : {}),
          ...(options.topic !== undefined ? { topic: options.topic } : {}),
          ...(options.bufferSteps !== undefined ? { bufferSteps: options.bufferSteps } : {}),
        });
        const events = new RankEvents(publisher, engine, rank.index);
        const cache = new TokenPrefixCache(Math.floor(capacityTokens / hashing.blockSize), hashing, events);
        started.push({ events, cache });
      }
    } catch (err) {
      await Promise.all(started.map(({ events }) => events.publisher.close()));
      throw err;
    }
    ranks.forEach((rank, i) => (rank.prefixCache = (started[i] as { cache: TokenPrefixCache }).cache));
    return new SimKvEvents(started, hashing);
  }

  get endpoints(): { endpoint: string; replayEndpoint: string | undefined }[] {
    return this.#ranks.map(({ events }) => ({ endpoint: events.publisher.endpoint, replayEndpoint: events.publisher.replayEndpoint }));
  }

  /** Every rank forgets its blocks and starts its sequence over, without announcing it (an engine restart). */
  restart(): void {
    for (const { events, cache } of this.#ranks) {
      cache.forget();
      events.restart();
    }
  }

  async close(): Promise<void> {
    for (const { events } of this.#ranks) events.flush();
    await Promise.all(this.#ranks.map(({ events }) => events.publisher.close()));
  }
}
