// Pure contracts (zod schemas and names). The NATS client is the separate entry point `@triad/bus/client`.
export {
  Subjects,
  SCHEDULER_QUEUE_GROUP,
  Buckets,
  ConfigKeys,
  endpointKey,
  parseEndpointKey,
  scrapeFreshnessKey,
  objectKey,
  parseObjectKey,
  inferencePoolServerName,
  parseInferencePoolServerName,
} from './names';
export {
  SCHEMA_VERSION,
  EndpointRecordSchema,
  ModelServerRecordSchema,
  ModelRouteRecordSchema,
  ScrapeFreshnessRecordSchema,
  effectiveScrapedAt,
} from './records';
export type {
  MetricsSnapshot,
  MooncakeBootstrap,
  EndpointRecord,
  ModelServerRecord,
  ModelRouteRecord,
  ProviderResolution,
  ListenerRef,
  ScrapeFreshnessRecord,
} from './records';
export { ExternalProviderRecordSchema, ProviderCredentialRecordSchema } from './provider-records';
export type { ExternalProviderRecord, ProviderCredentialRecord } from './provider-records';
export { EngineCredentialRecordSchema, engineCredentialAad } from './engine-credential-records';
export type { EngineCredentialRecord } from './engine-credential-records';
export { GatewayRecordSchema, HttpRouteRecordSchema } from './gateway-records';
export type { GatewayRecord, HttpRouteRuleRecord, HttpRouteRecord } from './gateway-records';
export { sealCredential, openCredential } from './credentials';
export type { SealedCredential } from './credentials';
export { SchedulingLimits, SchedulingRequestSchema, ScheduleBatchSchema, ScheduleBatchReplySchema } from './scheduling';
export { readSchedulingRequest } from './scheduling-read';
export { scheduleReplyJson } from './scheduling-write';
export type {
  MediaItem,
  SchedulingRequest,
  SchedulingRequestInput,
  EndpointRef,
  Attempt,
  EncoderChoice,
  Explanation,
  Disaggregation,
  StageFallback,
  Decision,
  DecisionError,
  DecisionOrError,
  ScheduleBatchReply,
} from './scheduling';
export { DispatchBatchSchema, PackedLegCodes, PackedLegsSchema } from './dispatch';
export { readDispatchBatch } from './dispatch-read';
export { readAffinityBatch } from './affinity-read';
export type { Stage, DispatchEvent, DispatchBatch, DispatchBatchMessage, PackedLegCode, PackedLegs } from './dispatch';
export {
  KvIndexLimits,
  KvIndexDeltaSchema,
  KvSourceMetaSchema,
  KvSnapshotChunkSchema,
  KvIndexerHeartbeatSchema,
  PodWatcherHeartbeatSchema,
  kvSourceMetaKey,
  kvSnapshotChunkKey,
} from './kv-index';
export type { KvIndexDelta, KvSourceMeta, KvGroupSpec } from './kv-index';
export { decodeMessage, validateMessage } from './codec';
export { AffinityBatchSchema } from './affinity';
export type { AffinityRecord, AffinityBatch } from './affinity';
export { OutlierRecordSchema, outlierKey } from './outliers';
export type { OutlierRecord, OutlierReason } from './outliers';
