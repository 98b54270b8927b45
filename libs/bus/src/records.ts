import { z } from 'zod';
import { InferenceEngineSchema, ModelRouteSpecSchema, ModelServerSpecSchema, PipelineModeSchema, RoleSchema } from '@triad/crd';

/** Version of the record and message contracts below; a reader rejects versions it does not know. */
export const SCHEMA_VERSION = 1;
const SchemaVersion = z.literal(SCHEMA_VERSION);

/**
 * Engine load as last scraped. `scrapedAt` is the time of a successful scrape (0 = never): the one that found these
 * numbers, or a later one that found them unchanged, at most one metrics heartbeat before the last successful
 * scrape; when scrapes fail, `stale` is set and `lastError` says why, and the numbers are those of the last good scrape.
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
  /**
   * When the TTFT/TPOT means last took in new observations (ms since epoch). An idle engine keeps its last means,
   * so readers age them out by this time (absent from older writers: read as `scrapedAt`).
   */
  latencyAt: z.number().int().min(0).optional(),
  /**
   * Per data-parallel rank (index = rank), from the series' `dp_rank` label, when the engine reports DP > 1
   * (SGLang DP attention): what rank hints balance on.
   */
  dpRanks: z
    .array(z.object({ running: z.number().min(0), waiting: z.number().min(0) }))
    .max(1024)
    .optional(),
  scrapedAt: z.number().int().min(0),
  stale: z.boolean(),
  lastError: z.string().optional(),
});
export type MetricsSnapshot = z.infer<typeof MetricsSnapshotSchema>;

/**
 * vLLM prefill of a ModelServer with `kvConnector: mooncake`: which Mooncake connector it runs. `concurrent` is
 * upstream vLLM's MooncakeConnector (its bootstrap server answered `GET /query`; `engineIds` are the engine id of
 * each DP rank, rank order), `sequential` is vllm-ascend's (NIXL-like; no bootstrap server answered). `source` says
 * whether the pod-watcher's probe or the ModelServer's `kvConnector.implementation` decided; `detail` what the probe saw.
 */
export const MooncakeFlowSchema = z.enum(['concurrent', 'sequential']);
export type MooncakeFlow = z.infer<typeof MooncakeFlowSchema>;
export const MooncakeBootstrapSchema = z.object({
  flow: MooncakeFlowSchema,
  engineIds: z.array(z.string().min(1).max(256)).max(1024).optional(),
  source: z.enum(['probe', 'override']),
  detail: z.string().max(512).optional(),
});
export type MooncakeBootstrap = z.infer<typeof MooncakeBootstrapSchema>;

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
  /**
   * Prefill bootstrap port. SGLang: the engine's own `/server_info.disaggregation_bootstrap_port` once read, else the
   * pod annotation (`triad.io/bootstrap-port`, then `sglang.ai/bootstrap-port`), else ModelServer.bootstrapPort, else
   * 8998. vLLM with `kvConnector: mooncake`: the same annotations, ModelServer.bootstrapPort, else 8998.
   */
  bootstrapPort: z.number().int().min(1).max(65535).optional(),
  /** vLLM prefill with `kvConnector: mooncake`: which Mooncake connector it runs (absent until known: then not ready). */
  mooncake: MooncakeBootstrapSchema.optional(),
  /**
   * Data-parallel ranks of the engine: SGLang `/server_info.dp_size`, vLLM the pod annotation `triad.io/dp-size`
   * (or the number of `triad.io/ec-control-addresses`); absent when unknown.
   */
  dpSize: z.number().int().min(1).optional(),
  /**
   * vLLM EPD consumer with a push EC connector (Mooncake): the control address (`tcp://host:port`) of each DP rank,
   * rank order, from `triad.io/ec-control-addresses` or `triad.io/ec-control-port`; absent when the pod declares none.
   */
  ecControlAddresses: z.array(z.string().min(1)).min(1).max(64).optional(),
  engine: InferenceEngineSchema,
  /**
   * The engine's KV-event sockets, from the pod annotations `triad.io/kv-events-endpoint` (and `-replay-endpoint`,
   * `-ranks`); absent when the pod publishes no events.
   */
  kvEvents: z
    .object({
      endpoint: z.string(),
      replayEndpoint: z.string().optional(),
      /** Data-parallel ranks publishing on consecutive ports from the endpoint's (vLLM, SGLang DP attention). */
      ranks: z.number().int().min(1).max(64).optional(),
    })
    .optional(),
  ready: z.boolean(),
  /** Model ids the engine serves (base model and LoRA adapters), from GET /v1/models. */
  models: z.array(z.string()),
  metrics: MetricsSnapshotSchema,
  /**
   * The pod-watcher replica that scraped this engine and wrote the record (its identity). While its scrape-freshness
   * record (`ScrapeFreshnessRecord`, bucket `triad_v1_scrape_freshness`) says it confirmed its engines at a later
   * time than `metrics.scrapedAt`, readers take that time as the scrape time: an engine whose numbers do not move is
   * not rewritten. Absent from older writers (their records carry their own scrape time).
   */
  scrapedBy: z.string().min(1).max(253).optional(),
  /** When the watcher last changed this record (ms since epoch). */
  updatedAt: z.number().int(),
});
export type EndpointRecord = z.infer<typeof EndpointRecordSchema>;

/**
 * One pod-watcher replica's word on the endpoint records it wrote (`scrapedBy` = `replica`): every one of them that
 * is not marked stale held the engine's numbers as of a successful scrape at or after `confirmedAt` (ms since
 * epoch). Rewritten by each replica every metrics heartbeat, so a fleet of idle engines costs one write per replica
 * instead of one per engine. Key: `scrapeFreshnessKey(replica)`.
 */
export const ScrapeFreshnessRecordSchema = z.object({
  schemaVersion: SchemaVersion,
  replica: z.string().min(1).max(253),
  confirmedAt: z.number().int().min(0),
});
export type ScrapeFreshnessRecord = z.infer<typeof ScrapeFreshnessRecordSchema>;

/** The scrape time a reader ages an endpoint's metrics by: its own, or its writer's later confirmation (never-scraped stays 0). */
export function effectiveScrapedAt(record: EndpointRecord, confirmedAt: ReadonlyMap<string, number>): number {
  const own = record.metrics.scrapedAt;
  if (own === 0 || record.scrapedBy === undefined) return own;
  const confirmed = confirmedAt.get(record.scrapedBy);
  return confirmed !== undefined && confirmed > own ? confirmed : own;
}

/**
 * A validated ModelServer with its resolved pipeline mode. Key: `objectKey(namespace, name)`. In Gateway API mode
 * an InferencePool is published the same way, as an aggregated ModelServer named `inferencePoolServerName(pool)`
 * with `origin` saying so, so the scheduler schedules its pods like any other.
 */
export const ModelServerRecordSchema = z.object({
  schemaVersion: SchemaVersion,
  namespace: z.string(),
  name: z.string(),
  mode: PipelineModeSchema,
  spec: ModelServerSpecSchema,
  origin: z.object({ kind: z.literal('InferencePool'), name: z.string() }).optional(),
  creationTimestamp: z.string().optional(),
  resourceVersion: z.string().optional(),
});
export type ModelServerRecord = z.infer<typeof ModelServerRecordSchema>;

/** One ExternalModelProvider a route's targets name, as the pod-watcher last saw it. */
export const ProviderResolutionSchema = z.object({
  /** `externalModelProviderName` of the targets (the provider is in the route's namespace). */
  name: z.string(),
  /** Key of its record in `triad_v1_externalproviders` (and of its credential, if any). */
  key: z.string(),
  /** False: no valid ExternalModelProvider of that name exists. */
  found: z.boolean(),
  /** The provider's Ready condition: configuration valid and credential resolved and published. */
  ready: z.boolean(),
  /** Kthena's reason of the Ready condition (`Ready`, `CredentialNotFound`...), or `NotFound`. */
  reason: z.string(),
});
export type ProviderResolution = z.infer<typeof ProviderResolutionSchema>;

/** A Gateway listener a route is attached to (Gateway API mode). */
export const ListenerRefSchema = z.object({
  /** Gateway namespace and name. */
  namespace: z.string(),
  gateway: z.string(),
  listener: z.string(),
  port: z.number().int().min(1).max(65535),
});
export type ListenerRef = z.infer<typeof ListenerRefSchema>;

/** A validated ModelRoute. Key: `objectKey(namespace, name)`. */
export const ModelRouteRecordSchema = z.object({
  schemaVersion: SchemaVersion,
  namespace: z.string(),
  name: z.string(),
  spec: ModelRouteSpecSchema,
  /** Every ExternalModelProvider its targets name, resolved (absent when it names none). */
  providers: z.array(ProviderResolutionSchema).optional(),
  /**
   * Gateway API mode only (absent otherwise): the listeners this route serves requests of. A route with
   * parentRefs is attached to the listeners they select (`sectionName`, `port`); one without to every listener
   * of the Gateways in its own namespace (Kthena's rule), and it is also served outside Gateway API listeners.
   */
  listeners: z.array(ListenerRefSchema).optional(),
  creationTimestamp: z.string().optional(),
  resourceVersion: z.string().optional(),
});
export type ModelRouteRecord = z.infer<typeof ModelRouteRecordSchema>;
