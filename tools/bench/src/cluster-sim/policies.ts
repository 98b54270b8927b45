import { endpointKey, type SchedulingRequest } from '@triad/bus';
import {
  EndpointIndex, InflightTracker, Scheduler, createInTreeRegistry, defaultSchedulerConfig, loadSchedulerConfig, prefixBlockHashes,
  type KvBlockIndex,
} from '@triad/scheduling';
import { endpointRecord, modelServerRecord } from '@triad/scheduling/testing';
import type { SimEngine } from './engine';
import { blockKeys, type Segment, type SimRequest } from './workload';

/** A router under test: picks an engine for each request, and hears what the engines report. */
export interface RoutingPolicy {
  readonly name: string;
  /** The engine index, or -1 when the router refuses the request (e.g. every engine filtered out). */
  route(request: SimRequest, now: number, keys: readonly number[]): number;
  /** The request was sent to `engine` (the gateway's dispatch start) / finished there. */
  started?(request: SimRequest, engine: number, now: number): void;
  finished?(request: SimRequest, engine: number, now: number): void;
  /** A metrics scrape of every engine (the pod-watcher's, every second). */
  scrape?(engines: readonly SimEngine[], now: number): void;
}

/** Wall-clock origin of simulated time for the scheduler (its `now` and metric ages). */
export const SIM_EPOCH = 1_700_000_000_000;
const MODEL = 'm';
const HASH_CHARS = 64 * 128;

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

  constructor(engines: number, opts: SchedulerPolicyOptions) {
    this.name = opts.name;
    this.#opts = opts;
    this.#index.applyModelServer({ op: 'PUT', value: modelServerRecord() });
    this.#keys = Array.from({ length: engines }, (_, i) => endpointKey('default', 'ms', `e${i}`));
    for (let i = 0; i < engines; i++) {
      this.#index.applyEndpoint({ op: 'PUT', value: endpointRecord({ pod: `e${i}`, scrapedAt: SIM_EPOCH }) });
    }
    const registry = createInTreeRegistry(opts.kvIndex ? { kvIndex: opts.kvIndex } : {});
    const loaded = loadSchedulerConfig(opts.config ?? defaultSchedulerConfig(), { registry });
    if (!loaded.ok) throw new Error(`${opts.name}: ${loaded.reasons.join('; ')}`);
    this.#scheduler = new Scheduler({ index: this.#index, tracker: this.#tracker, config: loaded.loaded });
  }

  request(request: SimRequest, keys?: readonly number[]): SchedulingRequest {
    const r: SchedulingRequest = {
      id: request.id, namespace: 'default', modelServer: 'ms', model: MODEL,
      prefixHashes: prefixBlockHashes(MODEL, renderPrompt(request.segments, this.#opts.mediaAwareHashes)),
      mediaItems: request.images.map((image, index) => ({ index, key: `u:${image.toString(16)}`, modality: 'image' as const })),
      inputTokens: request.promptTokens,
    };
    if (this.#opts.sessions && request.session !== undefined) r.session = request.session;
    if (this.#opts.kvIndex && keys && keys.length > 0) r.kvBlockHashes = keys.slice(0, 128).map(kvBlockKey);
    return r;
  }

  route(request: SimRequest, now: number, keys?: readonly number[]): number {
    const d = this.#scheduler.schedule(this.request(request, keys), SIM_EPOCH + now);
    if (!d.ok) {
      if (d.code === 'SCHED_FILTERED_OUT') return -1;
      throw new Error(`${this.name}: ${d.code} ${d.message}`);
    }
    return Number(d.attempts[0]!.endpoint.pod.slice(1));
  }

  started(request: SimRequest, engine: number, now: number): void {
    this.#tracker.applyEvent('gw', { type: 'start', requestId: request.id, endpoint: this.#keys[engine]!, stage: 'aggregated', at: SIM_EPOCH + now });
  }

  finished(request: SimRequest, engine: number, now: number): void {
    this.#tracker.applyEvent('gw', { type: 'finish', requestId: request.id, endpoint: this.#keys[engine]!, stage: 'aggregated', at: SIM_EPOCH + now });
  }

  scrape(engines: readonly SimEngine[], now: number): void {
    const at = SIM_EPOCH + Math.round(now);
    for (const e of engines) {
      const prev = this.#index.get(this.#keys[e.index]!)?.record.metrics;
      const fresh = e.ttftCount > 0 || e.tpotCount > 0;
      const ttftMs = e.ttftCount > 0 ? e.ttftSum / e.ttftCount : prev?.ttftMs;
      const tpotMs = e.tpotCount > 0 ? e.tpotSum / e.tpotCount : prev?.tpotMs;
      e.ttftSum = e.ttftCount = e.tpotSum = e.tpotCount = 0;
      const latencyAt = fresh ? at : prev?.latencyAt;
      this.#index.applyEndpoint({ op: 'PUT', value: endpointRecord({
        pod: `e${e.index}`, running: e.running, waiting: e.waiting, kv: e.kvUsage, scrapedAt: at,
        ...(ttftMs !== undefined ? { ttftMs } : {}), ...(tpotMs !== undefined ? { tpotMs } : {}),
        ...(latencyAt !== undefined ? { latencyAt } : {}),
      }) });
    }
  }
}

/** vLLM's reference proxy: engines in turn. */
export class RoundRobinPolicy implements RoutingPolicy {
  readonly name = 'round-robin';
  #next = 0;
  constructor(readonly engines: number) {}
  route(): number {
    const e = this.#next;
    this.#next = (this.#next + 1) % this.engines;
    return e;
  }
}

/**
 * A bound, not a router: reads every engine's true state (prefix cache, encoder cache, prefill queue, running
 * batch) and sends each request where its predicted TTFT is lowest. Greedy, so not a strict optimum, but no router
 * working from metrics and its own decisions can know more.
 */
export class OraclePolicy implements RoutingPolicy {
  readonly name = 'oracle (bound)';
  constructor(readonly engines: readonly SimEngine[]) {}
  route(request: SimRequest, now: number, keys: readonly number[]): number {
    let best = 0, bestMs = Infinity;
    for (const e of this.engines) {
      const queued = Math.max(0, e.prefillFreeAt - now);
      // Requests not yet admitted wait for a running slot: count each as a typical prefill.
      const blocked = e.waiting * 150 + (e.running >= e.cost.maxRunning ? 500 : 0);
      const ms = queued + blocked + e.prefillCostMs(request, keys);
      if (ms < bestMs) {
        bestMs = ms;
        best = e.index;
      }
    }
    return best;
  }
}

export { blockKeys };
