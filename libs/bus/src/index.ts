// Pure contracts (zod schemas and names). The NATS client is the separate entry point `@triad/bus/client`.
export {
  Subjects,
  SCHEDULER_QUEUE_GROUP,
  Buckets,
  BucketTtlMs,
  ConfigKeys,
  endpointKey,
  endpointKeyFilter,
  parseEndpointKey,
  scrapeFreshnessKey,
  objectKey,
  parseObjectKey,
  inferencePoolServerName,
  parseInferencePoolServerName,
} from './names';
export type { BucketName } from './names';
export {
  SCHEMA_VERSION,
  MetricsSnapshotSchema,
  MooncakeBootstrapSchema,
  MooncakeFlowSchema,
  EndpointRecordSchema,
  ModelServerRecordSchema,
  ModelRouteRecordSchema,
  ProviderResolutionSchema,
  ListenerRefSchema,
  ScrapeFreshnessRecordSchema,
  effectiveScrapedAt,
} from './records';
export type {
  MetricsSnapshot,
  MooncakeBootstrap,
  MooncakeFlow,
  EndpointRecord,
  ModelServerRecord,
  ModelRouteRecord,
  ProviderResolution,
  ListenerRef,
  ScrapeFreshnessRecord,
} from './records';
export { ExternalProviderRecordSchema, ProviderCredentialRecordSchema } from './provider-records';
export type { ExternalProviderRecord, ProviderCredentialRecord } from './provider-records';
export { GatewayRecordSchema, HttpRouteBackendSchema, HttpRouteRuleRecordSchema, HttpRouteRecordSchema } from './gateway-records';
export type { GatewayRecord, HttpRouteRuleRecord, HttpRouteRecord } from './gateway-records';
export { SealedCredentialSchema, credentialsKeyId, parseCredentialsKey, sealCredential, openCredential } from './credentials';
export type { SealedCredential } from './credentials';
export {
  SchedulingLimits,
  MediaItemSchema,
  SchedulingRequestSchema,
  EndpointRefSchema,
  AttemptSchema,
  EncoderChoiceSchema,
  ExplanationSchema,
  DisaggregationSchema,
  StageFallbackSchema,
  DecisionSchema,
  DecisionErrorSchema,
  DecisionOrErrorSchema,
  ScheduleBatchSchema,
  ScheduleBatchReplySchema,
} from './scheduling';
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
  ScheduleBatch,
  ScheduleBatchReply,
} from './scheduling';
export { StageSchema, DispatchEventSchema, DispatchBatchSchema } from './dispatch';
export type { Stage, DispatchEvent, DispatchBatch } from './dispatch';
export {
  KvIndexLimits,
  KvIndexDeltaSchema,
  KvSourceMetaSchema,
  KvGroupSpecSchema,
  KvSnapshotChunkSchema,
  KvIndexerHeartbeatSchema,
  PodWatcherHeartbeatSchema,
  kvSourceToken,
  kvSourceMetaKey,
  kvSnapshotChunkKey,
} from './kv-index';
export type { KvIndexDelta, KvSourceMeta, KvGroupSpec, KvSnapshotChunk, KvIndexerHeartbeat, PodWatcherHeartbeat } from './kv-index';
export { encodeMessage, decodeMessage } from './codec';
export type { DecodeResult } from './codec';
export { AffinityRecordSchema, AffinityBatchSchema } from './affinity';
export type { AffinityRecord, AffinityRecordInput, AffinityBatch } from './affinity';
export { OutlierRecordSchema, OutlierReasonSchema, outlierKey } from './outliers';
export type { OutlierRecord, OutlierReason } from './outliers';
