// @triad/scheduling: the pure scheduling model shared by the scheduler app and the gateway's local fallback
// (both run one SchedulerReplica).

// Hashing the gateway puts into SchedulingRequest.
export { prefixBlockHashes } from './hashing/prefix-hashes';
export type { PrefixHashOptions } from './hashing/prefix-hashes';
export { mediaContentKey } from './hashing/media-key';

// State fed by KV watches and dispatch messages.
export { EndpointIndex } from './state/endpoint-index';
export { InflightTracker } from './state/inflight-tracker';
export { KvBlockIndex } from './state/kv-block-index';
export { KeyAgreement } from './state/key-agreement';
export type { Candidates } from './framework/candidates';

// Config.
export { SchedulerConfigSchema } from './config/config-schema';
export { defaultSchedulerConfig } from './config/default-config';
export { loadSchedulerConfig } from './config/load-config';
export type { LoadedSchedulerConfig } from './config/load-config';
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
} from './framework/plugin';
export { PluginRegistry } from './framework/registry';
export { registerInTreePlugins, createInTreeRegistry } from './plugins/in-tree';
export type { TokenizerRef, TokenSource } from './plugins/precise-prefix-cache/precise-prefix-cache';
export { PrefixCacheScorer } from './plugins/prefix-cache/prefix-cache';
export { Scheduler } from './scheduler';
export type { SchedulingObserver, SchedulingPhase, SchedulingPhaseSink } from './planning/profile-run';
export type { PickVerdict } from './planning/pick-verdict';
export { SchedulerReplica } from './replica/scheduler-replica';
export type { ActiveConfig } from './replica/replica-config';
export { OutlierTable } from './state/outlier-table';
