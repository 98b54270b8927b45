// @triad/scheduling: the pure scheduling model shared by the scheduler app and the gateway's local fallback
// (both run one SchedulerReplica).

// Hashing the gateway puts into SchedulingRequest.
export { prefixBlockHashes, DEFAULT_PREFIX_BLOCK_SIZE, DEFAULT_PREFIX_MAX_BLOCKS } from './hashing/prefix-hashes';
export type { PrefixHashOptions } from './hashing/prefix-hashes';
export { mediaContentKey } from './hashing/media-key';
export type { MediaSource } from './hashing/media-key';

// State fed by KV watches and dispatch messages.
export { EndpointIndex } from './state/endpoint-index';
export type { EndpointChange, ModelServerChange, ScrapeFreshnessChange } from './state/endpoint-index';
export type { ModelServerPool } from './state/model-server-pool';
export { InflightTracker } from './state/inflight-tracker';
export { KvBlockIndex } from './state/kv-block-index';
export type { KvBlockIndexOptions, KvBlockIndexStats } from './state/kv-block-index';
export { hybridPrefixBlocks, groupBlockKey } from './state/kv-groups';
export { KeyAgreement } from './state/key-agreement';
export type { KeyAgreementCounts, KeyAgreementOptions } from './state/key-agreement';
export type { KvGroup } from './state/kv-groups';
export type { InflightTrackerOptions, InflightStats, ReservedLeg } from './state/inflight-tracker';
export type { Endpoint } from './state/endpoint';
export type { Candidates } from './framework/candidates';

// Config.
export { SchedulerConfigSchema } from './config/config-schema';
export type { SchedulerConfig, ProfileConfig, PluginConfig } from './config/config-schema';
export { defaultSchedulerConfig, builtInProfile } from './config/default-config';
export { loadSchedulerConfig } from './config/load-config';
export type { ConfigLoadResult, LoadConfigOptions, LoadedSchedulerConfig, LoadedProfile } from './config/load-config';
export { prefixHashOptionsOf, kvHashOptionsOf } from './config/prefix-hash-options';
export type { KvHashOptions } from './config/prefix-hash-options';

// Framework.
export { definePlugin, isFilter, isScorer, isPicker, isPostScheduleHook, isEndpointAware, isAffinityLearner } from './framework/plugin';
export type {
  Plugin,
  Filter,
  Scorer,
  Picker,
  PostScheduleHook,
  EndpointAware,
  AffinityLearner,
  PluginDefinition,
  PluginKind,
  CycleContext,
  PickInput,
  PickResult,
  ProfileRole,
} from './framework/plugin';
export { PluginRegistry } from './framework/registry';
export { registerInTreePlugins, createInTreeRegistry } from './plugins/in-tree';
export type { InTreePluginState } from './plugins/in-tree';
export {
  PrecisePrefixCacheScorer,
  PrecisePrefixCacheParamsSchema,
  PRECISE_PREFIX_CACHE,
  KVCACHE_AWARE,
  KvHashAlgoSchema,
} from './plugins/precise-prefix-cache/precise-prefix-cache';
export type { PrecisePrefixCacheParams, TokenizerRef, TokenSource } from './plugins/precise-prefix-cache/precise-prefix-cache';
export { PrefixCacheScorer, PREFIX_CACHE } from './plugins/prefix-cache/prefix-cache';
export { EncoderCacheScorer, ENCODER_CACHE } from './plugins/encoder-cache/encoder-cache';
export { SessionAffinityScorer, SESSION_AFFINITY } from './plugins/session-affinity/session-affinity';
export { Scheduler } from './scheduler';
export type { SchedulerOptions } from './scheduler';
export type { SchedulingObserver, SchedulingPhase, SchedulingPhaseSink } from './planning/profile-run';
export { ONLY_CANDIDATE, TIE_BREAK } from './planning/pick-verdict';
export type { PickVerdict } from './planning/pick-verdict';
export { SchedulerReplica } from './replica/scheduler-replica';
export type { SchedulerReplicaOptions } from './replica/scheduler-replica';
export { ReplicaConfig } from './replica/replica-config';
export type { ActiveConfig, ConfigOrigin, ConfigReloadResult, ConfigLog } from './replica/replica-config';
export { OutlierTable, ejectionOf } from './state/outlier-table';
export type { Ejection, EjectionPolicy } from './state/outlier-table';
export type { OutlierChange, OutlierListener } from './state/outlier-table';
export { OUTLIER_EJECTION } from './planning/profile-run';
