import type { z } from 'zod';
import type { AffinityRecord, MediaItem, SchedulingRequest } from '@triad/bus';
import type { Endpoint } from '../state/endpoint';
import type { Candidates } from './candidates';

/** The profile a plugin runs in: one per stage of the pipeline. */
export type ProfileRole = 'aggregated' | 'decode' | 'prefill' | 'encode';

/**
 * What a plugin may read while one request is scheduled. The object is reused across calls: read it during the
 * call, never keep it.
 */
export interface CycleContext {
  readonly request: SchedulingRequest;
  /** Milliseconds since the epoch at which the decision is made (metrics age, expiry). */
  readonly now: number;
  /** 32-bit hash of the request id: seeds tie-breaking and any per-request randomness, so answers repeat. */
  readonly seed: number;
  readonly role: ProfileRole;
  /**
   * An affinity scorer calls this when its load bound took its score away from a candidate it would have scored
   * (quality metrics: a pick that then went elsewhere counts as affinity overruled by load). Optional, so a
   * hand-made context in a plugin's own tests needs none.
   */
  loadBounded?(scorer: string): void;
  /**
   * False when the endpoints being scored, or the endpoint a post-schedule hook is told about, will not encode the
   * request's media themselves — a decode pod behind a prefill pod receives KV, not images — so a media cache neither
   * scores them nor learns it. A decode run is scored with false when the request cannot skip its prefill leg (its
   * prompt is too long for a decode pod to prefill, or the shortcut is off); its hooks get false when the decision
   * kept the prefill leg. Undefined or true (encodes) elsewhere.
   */
  readonly encodesMedia?: boolean;
}

/** Identity of a configured plugin instance, logged as `name/type`. */
export interface Plugin {
  readonly name: string;
  readonly type: string;
}

/**
 * Removes candidates by clearing `keep[i]` (it arrives 1 for every i < size). The runtime compacts the set
 * afterwards, and only when something was removed.
 */
export interface Filter extends Plugin {
  filter(ctx: CycleContext, candidates: Candidates, keep: Uint8Array): void;
}

/**
 * Scores candidates 0..100 by writing `out[i]` for candidate i. `out` arrives zeroed: a candidate the scorer has
 * no opinion on keeps 0 and stays a candidate. Values outside 0..100 (or NaN) are clamped by the runtime.
 */
export interface Scorer extends Plugin {
  score(ctx: CycleContext, candidates: Candidates, out: Float64Array): void;
  /** An affinity scorer with a load bound (it reports `ctx.loadBounded`): quality metrics count its overrules. */
  readonly loadBoundedAffinity?: boolean;
}

/** Input of a picker: the scored candidates of one profile run. */
export interface PickInput {
  readonly candidates: Candidates;
  /** Weighted sum of scores per candidate. */
  readonly finals: Float64Array;
  /** How many to return, in order of preference (at most the number of candidates). */
  readonly count: number;
  /** Encode profile: the media item being placed. */
  readonly item?: MediaItem;
  /** Encode profile: items of this request already placed on each candidate. */
  readonly pending?: Int32Array;
}

/** The picker's answer: candidate indices in order of preference, and whether content affinity decided. */
export interface PickResult {
  readonly order: number[];
  readonly affinity?: boolean;
}

/** Orders the scored candidates; index 0 is the choice, the rest are failover alternates. */
export interface Picker extends Plugin {
  pick(ctx: CycleContext, input: PickInput): PickResult;
}

/** Runs after a decision with the endpoint chosen in the profile (e.g. to learn which pod now caches a prefix). */
export interface PostScheduleHook extends Plugin {
  postSchedule(ctx: CycleContext, chosen: Endpoint): void;
}

/** Plugins holding per-endpoint state implement this to forget an endpoint that left the index. */
export interface EndpointAware {
  endpointRemoved(key: string): void;
}

/**
 * Plugins whose state follows decisions (prefix tables, encoder caches, sessions) implement this to apply what
 * another replica's decision taught, so every replica keeps the same affinity state.
 */
export interface AffinityLearner {
  learn(record: AffinityRecord): void;
}

/**
 * Plugins that track where content lives answer what an endpoint probably holds for a request, so the
 * disaggregation planner can predict the cost of each stage there.
 */
export interface CacheEstimator {
  /** Leading prompt blocks (of `request.prefixHashes`) the endpoint probably holds; undefined: no opinion. */
  cachedPrefixBlocks?(request: SchedulingRequest, endpointKey: string): number | undefined;
  /** Media items of the request whose encoder output the endpoint probably holds; undefined: no opinion. */
  cachedMediaItems?(request: SchedulingRequest, endpointKey: string): number | undefined;
}

export const isCacheEstimator = (p: Plugin): p is Plugin & CacheEstimator =>
  typeof (p as CacheEstimator).cachedPrefixBlocks === 'function' || typeof (p as CacheEstimator).cachedMediaItems === 'function';

export const isFilter = (p: Plugin): p is Filter => typeof (p as Partial<Filter>).filter === 'function';
export const isScorer = (p: Plugin): p is Scorer => typeof (p as Partial<Scorer>).score === 'function';
export const isPicker = (p: Plugin): p is Picker => typeof (p as Partial<Picker>).pick === 'function';
export const isPostScheduleHook = (p: Plugin): p is PostScheduleHook => typeof (p as Partial<PostScheduleHook>).postSchedule === 'function';
export const isEndpointAware = (p: Plugin): p is Plugin & EndpointAware =>
  typeof (p as Partial<EndpointAware>).endpointRemoved === 'function';

export const isAffinityLearner = (p: Plugin): p is Plugin & AffinityLearner => typeof (p as Partial<AffinityLearner>).learn === 'function';

/** The slots a plugin type can fill, for docs and load-time checks. */
export type PluginKind = 'filter' | 'scorer' | 'picker' | 'post-schedule';

/** A plugin type: its name, its args schema (validated at config load) and a factory. */
export interface PluginDefinition<P extends z.ZodType = z.ZodType> {
  readonly type: string;
  readonly kinds: readonly PluginKind[];
  /** One line for docs. */
  readonly description: string;
  /** zod schema of `args`; must accept `{}` when every arg has a default. */
  readonly params: P;
  create(name: string, params: z.output<P>): Plugin;
}

/** Declares a plugin type (typed params for `create`). */
export function definePlugin<P extends z.ZodType>(definition: PluginDefinition<P>): PluginDefinition<P> {
  return definition;
}
