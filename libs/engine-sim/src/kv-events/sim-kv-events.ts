import { ZmqEventPublisher, encodeKvEventBatch, type KvEventOut } from '@triad/kv-events';
import type { Rank } from '../engine/rank';
import type { EngineKind, KvEventsSimOptions } from '../options';
import type { EngineCore } from '../engine/core/engine-core';
import { SimBlockHashing } from './block-hashing';
import { PoolEventPublisher } from './core-kv-events';
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

interface RankKvEvents {
  readonly events: RankEvents;
  readonly cache: TokenPrefixCache;
  /** The rank's engine core, whose block pool publishes (then the token prefix cache is not used). */
  readonly core: EngineCore | undefined;
}

/**
 * The KV-event side of a simulated engine: one PUB socket (and replay ROUTER) per DP rank on the configured
 * endpoint + rank. A rank with an engine core publishes from the core's block pool (blocks named by
 * {@link coreBlockKeys}); otherwise its prefix cache is replaced by a {@link TokenPrefixCache} that publishes.
 */
export class SimKvEvents {
  readonly #ranks: RankKvEvents[];
  readonly hashing: SimBlockHashing;

  private constructor(ranks: RankKvEvents[], hashing: SimBlockHashing) {
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
    const core = ranks.find((r) => r.core)?.core;
    if (core && (engine !== 'vllm' || hashing.hybrid || core.config.blockSize !== hashing.blockSize)) {
      throw new Error(
        `kvEvents with engineCore: only a vLLM engine with one KV-cache group and blockSize ${core.config.blockSize} (the core's) is supported`,
      );
    }
    const started: RankKvEvents[] = [];
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
        started.push({ events, cache, core: rank.core });
      }
    } catch (err) {
      await Promise.all(started.map(({ events }) => events.publisher.close()));
      throw err;
    }
    ranks.forEach((rank, i) => {
      const { cache, events, core } = started[i];
      if (core) core.pool.listener = new PoolEventPublisher(events, hashing.blockSize);
      else rank.prefixCache = cache;
    });
    return new SimKvEvents(started, hashing);
  }

  get endpoints(): { endpoint: string; replayEndpoint: string | undefined }[] {
    return this.#ranks.map(({ events }) => ({ endpoint: events.publisher.endpoint, replayEndpoint: events.publisher.replayEndpoint }));
  }

  /** Every rank forgets its blocks and starts its sequence over, without announcing it (an engine restart). */
  restart(): void {
    for (const { events, cache, core } of this.#ranks) {
      cache.forget();
      if (core) {
        const listener = core.pool.listener;
        core.pool.listener = undefined;
        core.resetPrefixCache();
        core.pool.listener = listener;
      }
      events.restart();
    }
  }

  async close(): Promise<void> {
    for (const { core } of this.#ranks) if (core) core.pool.listener = undefined;
    for (const { events } of this.#ranks) events.flush();
    await Promise.all(this.#ranks.map(({ events }) => events.publisher.close()));
  }
}
