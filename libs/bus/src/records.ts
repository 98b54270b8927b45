import { z } from 'zod';
import { InferenceEngineSchema, ModelRouteSpecSchema, ModelServerSpecSchema, PipelineModeSchema, RoleSchema } from '@triad/crd';

/** Version of the record and message contracts below; a reader rejects versions it does not know. */
export const SCHEMA_VERSION = 1;
const SchemaVersion = z.literal(SCHEMA_VERSION);

/**
 * Engine load as last scraped. `scrapedAt` is the time of the last successful scrape (0 = never); when scrapes
 * fail, `stale` is set and `lastError` says why, and the numbers are those of the last good scrape.
 */
export const MetricsSnapshotSchema = z.object({
  running: z.number().min(0),
  waiting: z.number().min(0),
  /** KV-cache usage, 0..1 (vllm:kv_cache_usage_perc, sglang:token_usage). */
  kvCacheUsage: z.number().min(0).max(1),
  /** Mean time to first token over the last scrape interval, ms (absent until there is data). */
  ttftMs: z.number().min(0).optional(),
  /** Mean time per output token over the last scrape interval, ms. */
  tpotMs: z.number().min(0).optional(),
  scrapedAt: z.number().int().min(0),
  stale: z.boolean(),
  lastError: z.string().optional(),
});
export type MetricsSnapshot = z.infer<typeof MetricsSnapshotSchema>;

/** One pod serving one ModelServer in one role. Key: `endpointKey(namespace, modelServer, pod)`. */
export const EndpointRecordSchema = z.object({
  schemaVersion: SchemaVersion,
  namespace: z.string(),
  modelServer: z.string(),
  pod: z.string(),
  role: RoleSchema,
  /** PD group (value of the pdGroup.groupKey label); absent for aggregated pods and ungrouped encoders. */
  group: z.string().optional(),
  ip: z.string(),
  /** Port for this role (workloadPort.<role>Port or workloadPort.port). */
  port: z.number().int().min(1).max(65535),
  /** SGLang prefill bootstrap port (pod annotation, else ModelServer.bootstrapPort, else 8998). */
  bootstrapPort: z.number().int().min(1).max(65535).optional(),
  engine: InferenceEngineSchema,
  /**
   * The engine's KV-event sockets, from the pod annotations `triad.io/kv-events-endpoint` (and `-replay-endpoint`,
   * `-ranks`); absent when the pod publishes no events.
   */
  kvEvents: z.object({
    endpoint: z.string(),
    replayEndpoint: z.string().optional(),
    /** Data-parallel ranks publishing on consecutive ports from the endpoint's (vLLM, SGLang DP attention). */
    ranks: z.number().int().min(1).max(64).optional(),
  }).optional(),
  ready: z.boolean(),
  /** Model ids the engine serves (base model and LoRA adapters), from GET /v1/models. */
  models: z.array(z.string()),
  metrics: MetricsSnapshotSchema,
  /** When the watcher last changed this record (ms since epoch). */
  updatedAt: z.number().int(),
});
export type EndpointRecord = z.infer<typeof EndpointRecordSchema>;

/** A validated ModelServer with its resolved pipeline mode. Key: `objectKey(namespace, name)`. */
export const ModelServerRecordSchema = z.object({
  schemaVersion: SchemaVersion,
  namespace: z.string(),
  name: z.string(),
  mode: PipelineModeSchema,
  spec: ModelServerSpecSchema,
  creationTimestamp: z.string().optional(),
  resourceVersion: z.string().optional(),
});
export type ModelServerRecord = z.infer<typeof ModelServerRecordSchema>;

/** A validated ModelRoute. Key: `objectKey(namespace, name)`. */
export const ModelRouteRecordSchema = z.object({
  schemaVersion: SchemaVersion,
  namespace: z.string(),
  name: z.string(),
  spec: ModelRouteSpecSchema,
  creationTimestamp: z.string().optional(),
  resourceVersion: z.string().optional(),
});
export type ModelRouteRecord = z.infer<typeof ModelRouteRecordSchema>;
