import { z } from 'zod';
import type { AffinityRecord } from '@triad/bus';
import type { SchedulingRequest } from '@triad/bus';
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
import type { Endpoint } from '../../state/endpoint';
import { DEFAULT_PREFIX_BLOCK_SIZE, DEFAULT_PREFIX_MAX_BLOCKS } from '../../hashing/prefix-hashes';
import { PrefixStore } from './prefix-store';

const PREFIX_CACHE = 'prefix-cache';

export const PrefixCacheParamsSchema = z
  .object({
    /**
     * Characters per hashed block. Hashing happens in the gateway (`prefixBlockHashes`), so this is what it should
     * use; the scheduler itself only sees hashes. Read it with `prefixHashOptionsOf(config)`.
     */
    blockSizeToHash: z.number().int().min(1).default(DEFAULT_PREFIX_BLOCK_SIZE),
    /** Most leading blocks matched (longer hash lists are truncated). */
    maxBlocksToMatch: z.number().int().min(1).max(256).default(DEFAULT_PREFIX_MAX_BLOCKS),
    /** Hashes remembered per endpoint and model (LRU). */
    maxHashCacheSize: z.number().int().min(1).default(50_000),
    /** Stop looking after this many matching endpoints. */
    topKMatches: z.number().int().min(1).default(5),
  })
  .strict();
export type PrefixCacheParams = z.infer<typeof PrefixCacheParamsSchema>;

/**
 * Kthena's prefix-cache: endpoints that were recently sent the same prompt prefix probably still hold its KV
 * blocks. Walking the request's chained hashes from the longest prefix down, the first hash an endpoint holds gives
 * its match length; `score = matchLen/len(hashes)·100`, 0 for endpoints with no match. After a decision the chosen
 * endpoint of each profile is recorded as holding every hash.
 */
export class PrefixCacheScorer implements Scorer, PostScheduleHook, EndpointAware, AffinityLearner, CacheEstimator {
  readonly type = PREFIX_CACHE;
  readonly name: string;
  readonly params: PrefixCacheParams;
  readonly store: PrefixStore;

  constructor(name: string, params: PrefixCacheParams) {
    this.name = name;
    this.params = params;
    this.store = new PrefixStore(params.maxHashCacheSize);
  }

  score(ctx: CycleContext, c: Candidates, out: Float64Array): void {
    const hashes = ctx.request.prefixHashes;
    const n = Math.min(hashes.length, this.params.maxBlocksToMatch);
    let found = 0;
    for (let i = n - 1; i >= 0 && found < this.params.topKMatches; i--) {
      const owners = this.store.owners(ctx.request.model, hashes[i]);
      if (!owners) continue;
      for (const key of owners) {
        const pos = c.indexOf(key);
        if (pos < 0 || out[pos] > 0) continue;
        out[pos] = ((i + 1) / n) * 100;
        if (++found >= this.params.topKMatches) break;
      }
    }
  }

  cachedPrefixBlocks(request: SchedulingRequest, endpointKey: string): number {
    const hashes = request.prefixHashes;
    for (let i = Math.min(hashes.length, this.params.maxBlocksToMatch) - 1; i >= 0; i--) {
      if (this.store.owners(request.model, hashes[i])?.has(endpointKey) === true) return i + 1;
    }
    return 0;
  }

  postSchedule(ctx: CycleContext, chosen: Endpoint): void {
    const hashes = ctx.request.prefixHashes;
    if (hashes.length === 0) return;
    const n = Math.min(hashes.length, this.params.maxBlocksToMatch);
    this.store.insert(ctx.request.model, n === hashes.length ? hashes : hashes.slice(0, n), chosen.key);
  }

  /** Another replica sent these blocks to `record.endpoint`: the same insert as after a decision here. */
  learn(record: AffinityRecord): void {
    const hashes = record.prefixHashes;
    if (hashes.length === 0 || record.role === 'encode') return;
    const n = Math.min(hashes.length, this.params.maxBlocksToMatch);
    this.store.insert(record.model, n === hashes.length ? hashes : hashes.slice(0, n), record.endpoint);
  }

  endpointRemoved(key: string): void {
    this.store.removeEndpoint(key);
  }
}

export const prefixCachePlugin = definePlugin({
  type: PREFIX_CACHE,
  kinds: ['scorer', 'post-schedule'],
  description: 'Scores by the longest prompt prefix recently sent to the endpoint (chained block hashes, per-endpoint LRU).',
  params: PrefixCacheParamsSchema,
  create: (name, params) => new PrefixCacheScorer(name, params),
});
