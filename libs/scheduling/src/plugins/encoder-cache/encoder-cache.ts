import { LRUCache } from 'lru-cache';
import { z } from 'zod';
import type { AffinityRecord, SchedulingRequest } from '@triad/bus';
import {
  definePlugin,
  type AffinityLearner,
  type CacheEstimator,
  type CycleContext,
  type EndpointAware,
  type PostScheduleHook,
  type Scorer,
} from '../../framework/plugin';
import type { Candidates } from '../../framework/candidates';
import { combine32, hashString32 } from '../../hashing/fast-hash';
import type { Endpoint } from '../../state/endpoint';
import { DEFAULT_LOAD_FLOOR, withinLoadBound } from '../bounded-load';

const ENCODER_CACHE = 'encoder-cache';

export const EncoderCacheParamsSchema = z
  .object({
    /** Bounded load, as for encoders: past loadFactor × the mean in-flight count a pod gets no affinity score. */
    loadFactor: z.number().min(1).max(10).default(1.25),
    /** In-flight requests a pod may always run and keep its affinity, however idle the others (absolute floor). */
    loadFloor: z.number().int().min(0).max(1000).default(DEFAULT_LOAD_FLOOR),
    /** Past the bound, a pod keeps its affinity while one more request joins its running batch (`hasBatchRoom`). */
    batchRoom: z.boolean().default(true),
    /** Media items remembered per endpoint (LRU): about what its encoder cache holds. */
    maxItemsPerEndpoint: z.number().int().min(1).default(64),
    /** Share of an unseen item's score given to the pod its content key hashes to (so first sends agree too). */
    homeShare: z.number().min(0).max(1).default(1),
    /** Weigh each item by how few candidates hold it (`2 − holders/candidates`) instead of equal shares. */
    weighByHolders: z.boolean().default(true),
  })
  .strict();
export type EncoderCacheParams = z.infer<typeof EncoderCacheParamsSchema>;

/**
 * Encoder-cache affinity for the pods that encode media themselves (aggregated, prefill, decode): a pod recently
 * sent an image probably still holds its encoder output (and, after the same preceding text, its KV). Each media
 * item contributes its part of 100 to every candidate known to hold it, the larger the fewer candidates hold it
 * (`weighByHolders`; equal parts `100/items` without); an item no candidate holds gives `homeShare` of
 * that to its rendezvous-hash home (hash(content key, endpoint key)), so a popular image's first requests already
 * agree on a pod on every replica. Pods past the load bound score 0. Learns after each decision and from other
 * replicas' records; forgets removed endpoints. Scores nothing where the pods will not encode the media
 * (`ctx.encodesMedia` false: the decode pods of a request that keeps its prefill leg).
 */
/** An item's weight among a request's items: 1, or with `weighByHolders` `2 − max(1, holders)/candidates`. */
function itemValue(weighByHolders: boolean, holders: number, candidates: number): number {
  return weighByHolders ? 2 - Math.max(1, holders) / candidates : 1;
}

export class EncoderCacheScorer implements Scorer, PostScheduleHook, AffinityLearner, EndpointAware, CacheEstimator {
  readonly type = ENCODER_CACHE;
  readonly name: string;
  readonly loadBoundedAffinity = true;
  readonly #params: EncoderCacheParams;
  /** content key → endpoints holding it. */
  readonly #owners = new Map<string, Set<string>>();
  /** endpoint → its keys, least recently used first. */
  readonly #perEndpoint = new Map<string, LRUCache<string, true>>();
  /** `score`'s buffers: the holding candidates' positions, item after item, and where each item's end. */
  readonly #at: number[] = [];
  readonly #ends: number[] = [];

  constructor(name: string, params: EncoderCacheParams) {
    this.name = name;
    this.#params = params;
  }

  holds(endpoint: string, key: string): boolean {
    return this.#perEndpoint.get(endpoint)?.has(key) === true;
  }

  cachedMediaItems(request: SchedulingRequest, endpointKey: string): number {
    const held = this.#perEndpoint.get(endpointKey);
    if (!held) return 0;
    let n = 0;
    for (const item of request.mediaItems) if (held.has(item.key)) n++;
    return n;
  }

  score(ctx: CycleContext, c: Candidates, out: Float64Array): void {
    const items = ctx.request.mediaItems;
    // Pods that will not encode the media (a decode run whose request keeps its prefill leg) get no image affinity:
    // a hit there is impossible, and an unseen item's home would only pull the request away from the less loaded pods.
    if (items.length === 0 || ctx.role === 'encode' || ctx.encodesMedia === false || c.size === 0) return;
    const share = 100 / items.length;
    // The candidates holding each item, item after item in `at` (item k's end in `ends[k]`): buffers of the scorer's,
    // not arrays and closures per item and call (this ran in unoptimized code, 7k instructions per EPD decision).
    const at = this.#at;
    const ends = this.#ends;
    at.length = 0;
    ends.length = 0;
    for (let k = 0; k < items.length; k++) {
      const owners = this.#owners.get(items[k].key);
      if (owners !== undefined) {
        for (const key of owners) {
          const pos = c.indexOf(key);
          if (pos >= 0) at.push(pos);
        }
      }
      ends.push(at.length);
    }
    // Each item's part of the score: equal shares, or (weighByHolders) more for an item fewer candidates hold. A hit
    // on an item every pod holds can be had almost anywhere, and missing it only adds a copy of an image in demand;
    // an item one pod holds is a hit there only. So a pod holding all of a request's items beats pods holding only
    // the widely held one by more, and when no pod holds all of them the request goes where the rarer one is.
    const weigh = this.#params.weighByHolders;
    let total = 0;
    for (let k = 0, start = 0; k < items.length; start = ends[k], k++) total += itemValue(weigh, ends[k] - start, c.size);
    let unseen = 0;
    for (let k = 0, start = 0; k < items.length; start = ends[k], k++) {
      const end = ends[k];
      const part = (100 * itemValue(weigh, end - start, c.size)) / total;
      for (let j = start; j < end; j++) out[at[j]] = out[at[j]] + part;
      if (end === start) unseen++;
    }
    // An unseen item is encoded wherever the request goes: its home only gives the replicas a pod to agree on when
    // nothing else does. When some candidate holds another of the request's items, a home scored as high would
    // draw the request away from a certain hit for no gain (half the 2-image requests with one new image lost it).
    if (unseen === items.length && this.#params.homeShare > 0) {
      for (const item of items) {
        const h = hashString32(item.key);
        let home = 0,
          best = -1;
        for (let i = 0; i < c.size; i++) {
          const w = combine32(h, c.keyHash[i]);
          if (w > best) {
            best = w;
            home = i;
          }
        }
        out[home] = out[home] + share * this.#params.homeShare;
      }
    }
    // The load bound is built only when some candidate scored (it reads every candidate's in-flight count).
    let ok: ((i: number) => boolean) | undefined;
    for (let i = 0; i < c.size; i++) {
      if (!(out[i] > 0)) continue;
      ok ??= withinLoadBound(c, this.#params.loadFactor, this.#params.loadFloor, this.#params.batchRoom);
      if (!ok(i)) {
        out[i] = 0;
        ctx.loadBounded?.(this.name);
      }
    }
  }

  postSchedule(ctx: CycleContext, chosen: Endpoint): void {
    if (ctx.role === 'encode' || ctx.encodesMedia === false) return;
    for (const item of ctx.request.mediaItems) this.#insert(chosen.key, item.key);
  }

  learn(record: AffinityRecord): void {
    if (record.role === 'encode' || !record.mediaKeys) return;
    for (const key of record.mediaKeys) this.#insert(record.endpoint, key);
  }

  endpointRemoved(endpoint: string): void {
    const lru = this.#perEndpoint.get(endpoint);
    if (!lru) return;
    for (const key of lru.keys()) this.#unown(key, endpoint);
    this.#perEndpoint.delete(endpoint);
  }

  #insert(endpoint: string, key: string): void {
    let lru = this.#perEndpoint.get(endpoint);
    if (!lru) {
      lru = new LRUCache<string, true>({
        max: this.#params.maxItemsPerEndpoint,
        // The item the endpoint forgets stops naming it as an owner.
        dispose: (_held, forgotten, reason) => {
          if (reason === 'evict') this.#unown(forgotten, endpoint);
        },
      });
      this.#perEndpoint.set(endpoint, lru);
    }
    if (lru.get(key) !== undefined) return; // held already: now the most recent
    lru.set(key, true);
    let owners = this.#owners.get(key);
    if (!owners) {
      owners = new Set();
      this.#owners.set(key, owners);
    }
    owners.add(endpoint);
  }

  #unown(key: string, endpoint: string): void {
    const owners = this.#owners.get(key);
    if (!owners) return;
    owners.delete(endpoint);
    if (owners.size === 0) this.#owners.delete(key);
  }
}

export const encoderCachePlugin = definePlugin({
  type: ENCODER_CACHE,
  kinds: ['scorer', 'post-schedule'],
  description: "Scores pods that were recently sent the request's media items (their encoder cache), within a load bound.",
  params: EncoderCacheParamsSchema,
  create: (name, params) => new EncoderCacheScorer(name, params),
});
