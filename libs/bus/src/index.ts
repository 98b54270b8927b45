// Pure contracts (zod schemas and names). The NATS client is the separate entry point `@triad/bus/client`.
export { Subjects, SCHEDULER_QUEUE_GROUP, Buckets, ConfigKeys, endpointKey, endpointKeyFilter, parseEndpointKey, objectKey, parseObjectKey } from './names';
export type { BucketName } from './names';
export { SCHEMA_VERSION, MetricsSnapshotSchema, EndpointRecordSchema, ModelServerRecordSchema, ModelRouteRecordSchema } from './records';
export type { MetricsSnapshot, EndpointRecord, ModelServerRecord, ModelRouteRecord } from './records';
export {
  SchedulingLimits, MediaItemSchema, SchedulingRequestSchema, EndpointRefSchema, AttemptSchema, EncoderChoiceSchema,
  ExplanationSchema, DecisionSchema, DecisionErrorSchema, DecisionOrErrorSchema, ScheduleBatchSchema, ScheduleBatchReplySchema,
} from './scheduling';
export type {
  MediaItem, SchedulingRequest, SchedulingRequestInput, EndpointRef, Attempt, EncoderChoice, Explanation, Decision,
  DecisionError, DecisionOrError, ScheduleBatch, ScheduleBatchReply,
} from './scheduling';
export { StageSchema, DispatchEventSchema, DispatchBatchSchema } from './dispatch';
export type { Stage, DispatchEvent, DispatchBatch } from './dispatch';
export {
  KvIndexLimits, KvIndexDeltaSchema, KvSourceMetaSchema, KvSnapshotChunkSchema, KvIndexerHeartbeatSchema, kvSourceToken, kvSourceMetaKey,
  kvSnapshotChunkKey,
} from './kv-index';
export type { KvIndexDelta, KvSourceMeta, KvSnapshotChunk, KvIndexerHeartbeat } from './kv-index';
export { encodeMessage, decodeMessage } from './codec';
export type { DecodeResult } from './codec';
