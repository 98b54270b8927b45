import { endpointKey, type SchedulingRequest } from '@triad/bus';
import {
  EndpointIndex,
  InflightTracker,
  Scheduler,
  createInTreeRegistry,
  defaultSchedulerConfig,
  loadSchedulerConfig,
  prefixBlockHashes,
  type KvBlockIndex,
  type SchedulingObserver,
} from '@triad/scheduling';
import { endpointRecord, modelServerRecord } from '@triad/scheduling/testing';
import type { PoolKind, SimPool } from './simulate';
import { blockKeys, type Segment, type SimRequest } from './workload';

/**
 * Where a request goes: the engine that answers it (aggregated or decode pod), its prefill pod when the decision
 * has a prefill leg, and the encoder pod of each media item when it has encoder legs. Engine indices are into
 * `pool.engines`, encoder indices into `pool.encoders`.
 */
export interface Route {
  readonly engine: number;
  readonly prefill?: number;
  readonly encoders?: readonly number[];
}

/** What a gateway measures on a finished leg. */
export interface LegLatency {
  readonly ttftMs: number;
  readonly tpotMs?: number;
}

/** A leg of a request, as the router's dispatch events name it: `final` is the leg that answers. */
export type Leg = 'encode' | 'prefill' | 'final';

/** A router under test: picks where each request goes, and hears what the engines report. */
export interface RoutingPolicy {
  readonly name: string;
  /** The route, or null when the router refuses the request (e.g. every engine filtered out). */
  route(request: SimRequest, now: number, keys: readonly number[]): Route | null;
  /** A leg was sent to an engine or encoder (the gateway's dispatch start) / finished there. */
  started?(request: SimRequest, leg: Leg, index: number, now: number): void;
  /** `latency`: what the gateway measured on the leg (TTFT from the leg's start; TPOT of an answering leg). */
  finished?(request: SimRequest, leg: Leg, index: number, now: number, latency?: LegLatency): void;
  /** A metrics scrape of every pod (the pod-watcher's, every second). */
  scrape?(pool: SimPool, now: number): void;
}

/** Wall-clock origin of simulated time for the scheduler (its `now` and metric ages). */
export const SIM_EPOCH = 1_700_000_000_000;
const MODEL = 'm';
const HASH_CHARS = 64 * 128;
/**
 * The prompt's tokens as the gateway estimates them: its text only (the scheduler adds `mediaTokensPerItem`, 576 by
 * default, per media item). Not `promptTokens − 576 × images`: the cluster workloads' images are 256 tokens, and that
 * left the scheduler counting a 1-image image-qa prompt at its true ~420 tokens, where the gateway's estimate
 * plus 576 puts it above `maxLocalPrefillTokens` — the simulator let image requests prefill on decode pods that the
 * process benchmark never lets.
 */
const textTokens = (request: SimRequest): number => request.segments.reduce((n, s) => (s.image === undefined ? n + s.tokens : n), 0);

/** ChatML-style text of the prompt's first `limit` characters, as the gateway renders it for prefix hashing. */
export function renderPrompt(segments: readonly Segment[], mediaMarkers: boolean, limit = HASH_CHARS): string {
  let out = '';
  let open = false;
  for (const s of segments) {
    if (s.role) {
      if (open) out += '<|im_end|>\n';
      out += `<|im_start|>${s.role}\n`;
      open = true;
    } else if (s.image === undefined && out !== '') out += '\n';
    if (s.image !== undefined) {
      if (mediaMarkers) out += `<|media:u:${s.image.toString(16)}|>`;
    } else {
      const unit = `w${s.id.toString(36)} `;
      out += unit.repeat(Math.ceil((s.tokens * 4) / unit.length)).slice(0, s.tokens * 4);
    }
    if (out.length >= limit) return out.slice(0, limit);
  }
  return open ? `${out}<|im_end|>\n` : out;
}

export interface SchedulerPolicyOptions {
  readonly name: string;
  /** Scheduler config (YAML-shaped object); the built-in defaults when absent. */
  readonly config?: unknown;
  /** Mix media content keys into the prefix hashes (Triad's gateway does; Kthena drops media parts). */
  readonly mediaAwareHashes: boolean;
  /** Send the session key (Triad's gateway does when the request names one). */
  readonly sessions: boolean;
  /**
   * Precise prefix routing: the engines' block keys go with each request (`kvBlockHashes`, as the gateway computes
   * them) and the `precise-prefix-cache` scorer reads this index, which the engines' block events feed.
   */
  readonly kvIndex?: KvBlockIndex;
  /** The engines' kind: SGLang allows no per-request shortcut (default vLLM with NIXL KV and EC connectors). */
  readonly engine?: 'vLLM' | 'SGLang';
  /** Receives the scheduler's pick verdicts (why each profile's choice won), as the scheduler service's metrics do. */
  readonly observer?: SchedulingObserver;
}

/** A simulated block key as Triad names blocks (16 hex digits). */
export const kvBlockKey = (key: number): string => key.toString(16).padStart(16, '0');

/**
 * The real scheduler (libs/scheduling) in-process, as the gateway's local scheduler runs it: endpoint records
 * rewritten from each scrape, in-flight counts from this "gateway's" own dispatch events, prefix hashes from the
 * rendered prompt. It sees only what a deployment shows it (metrics, its own decisions), never the engines' caches.
 */
export class SchedulerPolicy implements RoutingPolicy {
  readonly name: string;
  readonly #index = new EndpointIndex();
  readonly #tracker = new InflightTracker();
  readonly #scheduler: Scheduler;
  readonly #opts: SchedulerPolicyOptions;
  readonly #keys: string[];
  readonly #encoderKeys: string[];
  readonly #roles: readonly ('aggregated' | 'prefill' | 'decode')[];
  readonly #byPod = new Map<string, number>();

  constructor(pool: SimPool, opts: SchedulerPolicyOptions) {
    this.name = opts.name;
    this.#opts = opts;
    const mode: PoolKind = pool.kind;
    const ms = modelServerRecord({ mode, engine: opts.engine ?? 'vLLM' });
    const spec =
      opts.engine === 'SGLang' || mode === 'aggregated'
        ? ms.spec
        : {
            ...ms.spec,
            kvConnector: { type: 'nixl' as const },
            ...(mode === 'epd'
              ? { ecConnector: { type: 'nixl' as const, enableMmEmbeds: false, maxEncoderBatch: 16, reencodeAttempts: 1 } }
              : {}),
          };
    this.#index.applyModelServer({ op: 'PUT', value: { ...ms, spec } });
    this.#roles = pool.engines.map((e) => (e.role === 'both' ? 'aggregated' : e.role));
    this.#keys = pool.engines.map((_, i) => endpointKey('default', 'ms', `e${i}`));
    this.#encoderKeys = pool.encoders.map((_, i) => endpointKey('default', 'ms', `x${i}`));
    pool.engines.forEach((_, i) => this.#byPod.set(`e${i}`, i));
    pool.encoders.forEach((_, i) => this.#byPod.set(`x${i}`, i));
    this.#put(pool, SIM_EPOCH);
    const registry = createInTreeRegistry(opts.kvIndex ? { kvIndex: opts.kvIndex } : {});
    const loaded = loadSchedulerConfig(opts.config ?? defaultSchedulerConfig(), { registry });
    if (!loaded.ok) throw new Error(`${opts.name}: ${loaded.reasons.join('; ')}`);
    this.#scheduler = new Scheduler({
      index: this.#index,
      tracker: this.#tracker,
      config: loaded.loaded,
      ...(opts.observer ? { observer: opts.observer } : {}),
    });
  }

  request(request: SimRequest, keys?: readonly number[]): SchedulingRequest {
    const r: SchedulingRequest = {
      id: request.id,
      namespace: 'default',
      modelServer: 'ms',
      model: MODEL,
      prefixHashes: prefixBlockHashes(MODEL, renderPrompt(request.segments, this.#opts.mediaAwareHashes)),
      mediaItems: request.images.map((image, index) => ({ index, key: `u:${image.toString(16)}`, modality: 'image' as const })),
      // As the gateway estimates it: the text only (the scheduler adds its per-item estimate for media).
      inputTokens: textTokens(request),
    };
    if (this.#opts.sessions && request.session !== undefined) r.session = request.session;
    if (this.#opts.kvIndex && keys && keys.length > 0) r.kvBlockHashes = keys.slice(0, 128).map(kvBlockKey);
    return r;
  }

  route(request: SimRequest, now: number, keys?: readonly number[]): Route | null {
    const d = this.#scheduler.schedule(this.request(request, keys), SIM_EPOCH + now);
    if (!d.ok) {
      if (d.code === 'SCHED_FILTERED_OUT') return null;
      throw new Error(`${this.name}: ${d.code} ${d.message}`);
    }
    const first = d.attempts[0];
    const engine = this.#byPod.get(first.endpoint.pod) as number;
    const prefill = first.prefill === undefined ? undefined : this.#byPod.get(first.prefill.pod);
    const encoders = d.encoders.length === 0 ? undefined : d.encoders.map((c) => this.#byPod.get(c.endpoint.pod) as number);
    return { engine, ...(prefill !== undefined ? { prefill } : {}), ...(encoders ? { encoders } : {}) };
  }

  #key(leg: Leg, index: number): string {
    return (leg === 'encode' ? this.#encoderKeys : this.#keys)[index];
  }

  started(request: SimRequest, leg: Leg, index: number, now: number): void {
    this.#tracker.applyEvent('gw', {
      type: 'start',
      requestId: request.id,
      endpoint: this.#key(leg, index),
      stage: stageOf(leg, this.#roles[index]),
      at: SIM_EPOCH + Math.round(now),
      // As the gateway sends it: the text's estimate, on every leg but the encoders'.
      ...(leg === 'encode' ? {} : { inputTokens: textTokens(request) }),
    });
  }

  finished(request: SimRequest, leg: Leg, index: number, now: number, latency?: LegLatency): void {
    this.#tracker.applyEvent('gw', {
      type: 'finish',
      requestId: request.id,
      endpoint: this.#key(leg, index),
      stage: stageOf(leg, this.#roles[index]),
      at: SIM_EPOCH + Math.round(now),
      ...(latency ? { ttftMs: latency.ttftMs, ...(latency.tpotMs !== undefined ? { tpotMs: latency.tpotMs } : {}) } : {}),
    });
  }

  scrape(pool: SimPool, now: number): void {
    this.#put(pool, SIM_EPOCH + Math.round(now));
  }

  /** Endpoint records as the pod-watcher writes them from a scrape (latency means over the interval). */
  #put(pool: SimPool, at: number): void {
    for (const e of pool.engines) {
      const prev = this.#index.get(this.#keys[e.index])?.record.metrics;
      const fresh = e.ttftCount > 0 || e.tpotCount > 0;
      const ttftMs = e.ttftCount > 0 ? e.ttftSum / e.ttftCount : prev?.ttftMs;
      const tpotMs = e.tpotCount > 0 ? e.tpotSum / e.tpotCount : prev?.tpotMs;
      e.ttftSum = e.ttftCount = e.tpotSum = e.tpotCount = 0;
      const latencyAt = fresh ? at : prev?.latencyAt;
      const role = this.#roles[e.index];
      this.#index.applyEndpoint({
        op: 'PUT',
        value: endpointRecord({
          pod: `e${e.index}`,
          role,
          ...(role === 'aggregated' ? {} : { group: 'g1' }),
          running: e.running,
          waiting: e.waiting,
          kv: e.kvUsage,
          scrapedAt: at,
          ...(ttftMs !== undefined ? { ttftMs } : {}),
          ...(tpotMs !== undefined ? { tpotMs } : {}),
          ...(latencyAt !== undefined ? { latencyAt } : {}),
        }),
      });
    }
    const now = at - SIM_EPOCH;
    for (const x of pool.encoders) {
      this.#index.applyEndpoint({
        op: 'PUT',
        value: endpointRecord({
          pod: `x${x.index}`,
          role: 'encode',
          group: 'g1',
          running: Math.min(1, x.pending(now)),
          waiting: Math.max(0, x.pending(now) - 1),
          scrapedAt: at,
        }),
      });
    }
  }
}

const stageOf = (leg: Leg, role: 'aggregated' | 'prefill' | 'decode' | undefined): 'aggregated' | 'encode' | 'prefill' | 'decode' =>
  leg === 'encode' ? 'encode' : leg === 'prefill' ? 'prefill' : role === 'aggregated' ? 'aggregated' : 'decode';

/** vLLM's reference proxy: engines in turn (per stage: prefills, decodes and encoders each in turn). */
export class RoundRobinPolicy implements RoutingPolicy {
  readonly name = 'round-robin';
  readonly #answering: number[];
  readonly #prefills: number[];
  #next = 0;
  #nextPrefill = 0;
  #nextEncoder = 0;

  constructor(readonly pool: SimPool) {
    this.#answering = pool.engines.filter((e) => e.role !== 'prefill').map((e) => e.index);
    this.#prefills = pool.engines.filter((e) => e.role === 'prefill').map((e) => e.index);
  }

  route(request: SimRequest): Route {
    const engine = this.#answering[this.#next];
    this.#next = (this.#next + 1) % this.#answering.length;
    if (this.#prefills.length === 0) return { engine };
    const prefill = this.#prefills[this.#nextPrefill];
    this.#nextPrefill = (this.#nextPrefill + 1) % this.#prefills.length;
    if (this.pool.encoders.length === 0 || request.images.length === 0) return { engine, prefill };
    const encoders = request.images.map(() => {
      const e = this.#nextEncoder;
      this.#nextEncoder = (e + 1) % this.pool.encoders.length;
      return e;
    });
    return { engine, prefill, encoders };
  }
}

/**
 * A bound, not a router: reads every pod's true state (prefix cache, encoder cache, prefill queue, running
 * batch) and sends each request where its predicted TTFT is lowest. Greedy, so not a strict optimum, but no router
 * working from metrics and its own decisions can know more. In PD/EPD pools it runs every stage: each item on an
 * encoder that holds it (else the one whose queue drains first), the prefill where it is cheapest, the decode on
 * the least busy decode pod.
 */
export class OraclePolicy implements RoutingPolicy {
  readonly name = 'oracle (bound)';
  /** Requests routed to each decode pod whose decode has not started there yet (they are in their prefill). */
  readonly #pending = new Map<number, number>();
  constructor(readonly pool: SimPool) {}

  started(_request: SimRequest, leg: Leg, index: number): void {
    if (leg === 'final' && this.pool.kind !== 'aggregated') this.#pending.set(index, (this.#pending.get(index) ?? 1) - 1);
  }

  route(request: SimRequest, now: number, keys: readonly number[]): Route {
    const { engines, encoders } = this.pool;
    let handed: Set<number> | undefined;
    let encoderChoice: number[] | undefined;
    if (encoders.length > 0 && request.images.length > 0) {
      handed = new Set(request.images);
      const extra = new Map<number, number>();
      encoderChoice = request.images.map((image) => {
        const holder = encoders.find((x) => x.holds(image));
        if (holder) return holder.index;
        let best = 0,
          bestAt = Infinity;
        for (const x of encoders) {
          const at = Math.max(now, x.freeAt) + (extra.get(x.index) ?? 0);
          if (at < bestAt) {
            bestAt = at;
            best = x.index;
          }
        }
        extra.set(best, (extra.get(best) ?? 0) + x0(this.pool));
        return best;
      });
    }
    const cheapest = (role: 'both' | 'prefill'): number => {
      let best = -1,
        bestMs = Infinity;
      for (const e of engines) {
        if (e.role !== role) continue;
        const queued = Math.max(0, e.prefillFreeAt - now);
        // Requests not yet admitted wait for a running slot: count each as a typical prefill.
        const blocked = e.waiting * 150 + (e.running >= e.cost.maxRunning ? 500 : 0);
        const ms = queued + blocked + e.prefillCostMs(request, keys, handed);
        if (ms < bestMs) {
          bestMs = ms;
          best = e.index;
        }
      }
      return best;
    };
    if (this.pool.kind === 'aggregated') return { engine: cheapest('both') };
    let decode = -1,
      load = Infinity;
    for (const e of engines) {
      if (e.role !== 'decode') continue;
      const l = e.running + e.waiting + (this.#pending.get(e.index) ?? 0);
      if (l < load) {
        load = l;
        decode = e.index;
      }
    }
    this.#pending.set(decode, (this.#pending.get(decode) ?? 0) + 1);
    return { engine: decode, prefill: cheapest('prefill'), ...(encoderChoice ? { encoders: encoderChoice } : {}) };
  }
}

const x0 = (pool: SimPool): number => pool.engines[0].cost.encodeMsPerItem;

export { blockKeys };
