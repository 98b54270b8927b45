import type { PromptTokens } from '@triad/kv-events';
import { randomUUID } from 'node:crypto';
import { networkInterfaces } from 'node:os';
import { Agent } from 'undici';
import { SimClock } from './engine/clock';
import type { GenerationEnv } from './engine/generation';
import { resolveLatencyModel, type LatencyModel } from './engine/latency';
import { Rank } from './engine/rank';
import { attachEngineCores } from './engine/core/attach-core';
import type { CachedPrompt } from './engine/prefix-cache';
import type { CoreBlockKeys } from './kv-events/core-kv-events';
import { SimCounters } from './counters';
import { FaultController } from './faults';
import type { EngineMetrics, HeldKv } from './metrics/engine-metrics';
import { SglangMetrics } from './metrics/sglang-metrics';
import { VllmMetrics } from './metrics/vllm-metrics';
import type { EngineKind, SimEngineOptions, SimLogger, SimRole } from './options';
import { RequestLog } from './request-log';
import { StreamStalls } from './http/stream-stalls';

const DEFAULT_MAX_MODEL_LEN = 32_768;
const NOTHING_HELD: HeldKv = Object.freeze({ requests: 0, blocks: 0 });

/** Everything one simulated engine owns; each `startSimEngine` builds its own (no module-level state). */
export class SimContext {
  readonly engine: EngineKind;
  readonly role: SimRole;
  readonly model: string;
  readonly host: string;
  /** The address peers are told to use (vLLM `remote_host`, SGLang `prefill_host`). */
  readonly advertiseHost: string;
  readonly loraAdapters: readonly string[];
  readonly maxModelLen: number;
  /** vLLM `remote_engine_id` of this instance. */
  readonly engineId: string;
  readonly startedAt = Math.floor(Date.now() / 1000);
  readonly latency: LatencyModel;
  readonly clock = new SimClock();
  readonly ranks: readonly Rank[];
  readonly counters: SimCounters;
  readonly faults: FaultController;
  readonly log: RequestLog;
  /** Streamed generations waiting for their reader to drain. */
  readonly stalls = new StreamStalls();
  readonly metrics: EngineMetrics;
  readonly #closing = new AbortController();
  /** Aborted when the engine closes: waits that outlive their client (a Mooncake or push transfer) end then. */
  readonly closed: AbortSignal = this.#closing.signal;
  /** Outbound HTTP (KV pulls, bootstrap waits, encoder calls) with its own connection pool. */
  readonly http = new Agent({ keepAliveTimeout: 4_000, connections: 64 });
  readonly logger: SimLogger | undefined;
  readonly env: GenerationEnv;
  port = 0;
  /** An engine restart as the prefix cache sees it (blocks forgotten, KV-event sequence from 0). */
  restartKvCache: () => void = () => this.resetPrefixCache();
  /** The engine's tokenizer for /tokenize and the render endpoints (set when the sim publishes KV events). */
  tokenizePrompt: ((body: Record<string, unknown>) => PromptTokens) | undefined;
  /**
   * The engine core's block hashes for a prompt, named with the engine's keys (set when the sim publishes KV events):
   * `layoutHashes` are the core's own, one per full block of the simulator's token count.
   */
  coreBlockKeys: ((prompt: CachedPrompt, layoutHashes: readonly number[]) => CoreBlockKeys) | undefined;
  /** KV this engine holds for a peer that has not taken it (set by the engine's routes; see `EngineMetrics.kvHeldBy`). */
  kvHeld: () => HeldKv = () => NOTHING_HELD;
  #nextRank = 0;

  constructor(readonly options: SimEngineOptions) {
    this.engine = options.engine;
    this.role = options.role;
    this.model = options.model ?? 'sim-model';
    this.host = options.host ?? '127.0.0.1';
    this.engineId = options.engineId ?? randomUUID();
    this.advertiseHost = options.advertiseHost ?? (isUnspecified(this.host) ? (firstExternalIPv4() ?? '127.0.0.1') : this.host);
    this.loraAdapters = options.loraAdapters ?? [];
    this.maxModelLen = options.maxModelLen ?? DEFAULT_MAX_MODEL_LEN;
    this.latency = resolveLatencyModel(options.latencyProfile ?? 'zero', options.latency);
    this.ranks = Array.from({ length: Math.max(1, options.dataParallel ?? 1) }, (_, i) => new Rank(i, this.latency));
    this.counters = new SimCounters(this.ranks.length);
    this.faults = new FaultController(options.fault);
    this.log = new RequestLog(options.requestLogLimit ?? 10_000);
    this.logger = options.logger;
    const setup = {
      model: this.model,
      ranks: this.ranks,
      maxModelLen: this.maxModelLen,
      loraAdapters: this.loraAdapters,
      engineType: sglangEngineType(this.role),
    };
    this.metrics = this.engine === 'vllm' ? new VllmMetrics(setup) : new SglangMetrics(setup);
    this.metrics.kvHeldBy(() => this.kvHeld());
    if (options.engineCore && this.engine === 'vllm' && !this.latency.zero) {
      attachEngineCores(this.ranks, this.latency, options.engineCore, this.metrics, this.counters);
    }
    this.env = {
      model: this.latency,
      clock: this.clock,
      recorder: this.metrics,
      onAbort: () => this.counters.inc('aborted'),
      stalls: this.stalls,
    };
  }

  get url(): string {
    return `http://${this.host.includes(':') ? `[${this.host}]` : this.host}:${this.port}`;
  }

  /** The rank a request runs on: the requested one when valid (DP-rank pinning), else round-robin. Counted per rank. */
  pickRank(requested?: number): Rank {
    let rank: Rank;
    if (requested !== undefined && Number.isInteger(requested) && requested >= 0 && requested < this.ranks.length) {
      rank = this.ranks[requested];
    } else {
      rank = this.ranks[this.#nextRank];
      this.#nextRank = (this.#nextRank + 1) % this.ranks.length;
    }
    this.counters.incRank(rank.index);
    return rank;
  }

  /** `/reset_prefix_cache` (vLLM), `/flush_cache` (SGLang): every rank drops its cached blocks (AllBlocksCleared). */
  resetPrefixCache(): void {
    for (const rank of this.ranks) {
      rank.prefixCache.clear();
      rank.core?.resetPrefixCache();
    }
  }

  /** Whether `model` names this engine's model or one of its LoRA adapters. */
  servesModel(model: string): boolean {
    return model === this.model || this.loraAdapters.includes(model);
  }

  async close(): Promise<void> {
    this.#closing.abort();
    this.clock.stop();
    for (const rank of this.ranks) rank.stop();
    // destroy, not close: a decode may still be long-polling a bootstrap server for up to its timeout.
    await this.http.destroy();
  }
}

function isUnspecified(host: string): boolean {
  return host === '0.0.0.0' || host === '::' || host === '';
}

function firstExternalIPv4(): string | undefined {
  for (const addrs of Object.values(networkInterfaces())) {
    for (const a of addrs ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  }
  return undefined;
}

function sglangEngineType(role: SimRole): string {
  return role === 'both' ? 'unified' : role;
}
