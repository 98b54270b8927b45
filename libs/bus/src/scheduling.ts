import { z } from 'zod';
import { PipelineModeSchema } from '@triad/crd';
import { MooncakeFlowSchema, SCHEMA_VERSION } from './records';

/** Upper bounds that keep one scheduling message small (request bodies never cross NATS). */
export const SchedulingLimits = { maxBatch: 256, maxPrefixHashes: 256, maxMediaItems: 64 } as const;

/** One media item of a request, as the scheduler needs it: position and content key, never the bytes. */
export const MediaItemSchema = z.object({
  /** Position of the item among the request's media parts (0-based, message order). */
  index: z.number().int().min(0),
  /** Content key (hash of the URL or data) used for encoder-cache affinity. */
  key: z.string().min(1),
  modality: z.enum(['image', 'audio', 'video']),
  /** Size of the item in the request, bytes (data URLs), when known. */
  bytes: z.number().int().min(0).optional(),
});
export type MediaItem = z.infer<typeof MediaItemSchema>;

/** What the gateway asks for one request. */
export const SchedulingRequestSchema = z.object({
  /** The request id (x-request-id); also seeds deterministic tie-breaking. */
  id: z.string().min(1),
  namespace: z.string(),
  modelServer: z.string(),
  /** Model name the engine will see: the ModelServer's model, or the LoRA adapter for LoRA matches. */
  model: z.string(),
  /** Chained prompt block hashes (hex) for prefix-cache affinity, computed by libs/scheduling's hasher. */
  prefixHashes: z.array(z.string()).max(SchedulingLimits.maxPrefixHashes).default([]),
  mediaItems: z.array(MediaItemSchema).max(SchedulingLimits.maxMediaItems).default([]),
  /**
   * Block keys of the prompt's leading full KV blocks as the ModelServer's engines hash them (hex16, block 0
   * first), for the `precise-prefix-cache` scorer; absent when that scorer is not configured or the gateway could
   * not tokenize the request.
   */
  kvBlockHashes: z.array(z.string()).max(SchedulingLimits.maxPrefixHashes).optional(),
  /**
   * Session key for session affinity (the `x-session-id` header, else the body's `session_id`, else `user`), so a
   * conversation's turns return to the pods that hold its context; absent when the request names none.
   */
  session: z.string().min(1).max(256).optional(),
  /** Estimated prompt tokens. */
  inputTokens: z.number().int().min(0).optional(),
  /** Endpoint keys to avoid (e.g. ones that just failed this request). */
  exclude: z.array(z.string()).optional(),
  /** Return per-endpoint filter and score details with the decision. */
  explain: z.boolean().optional(),
});
export type SchedulingRequest = z.infer<typeof SchedulingRequestSchema>;
export type SchedulingRequestInput = z.input<typeof SchedulingRequestSchema>;

/** Where to send a leg: enough to dial it without another lookup. */
export const EndpointRefSchema = z.object({
  key: z.string(),
  pod: z.string(),
  ip: z.string(),
  port: z.number().int(),
  /** Prefill bootstrap port (SGLang; vLLM with the Mooncake connector). */
  bootstrapPort: z.number().int().optional(),
  /** vLLM Mooncake prefill: `concurrent` (upstream vLLM, with each DP rank's engine id) or `sequential` (vllm-ascend). */
  mooncake: z.object({ flow: MooncakeFlowSchema, engineIds: z.array(z.string()).optional() }).optional(),
  /** Data-parallel ranks, when the record knows them (vLLM EPD consumers: `X-data-parallel-rank` pins one). */
  dpSize: z.number().int().min(1).optional(),
  /** vLLM EPD push EC connector: the consumer's control address per DP rank (`tcp://host:port`). */
  ecControlAddresses: z.array(z.string()).optional(),
});
export type EndpointRef = z.infer<typeof EndpointRefSchema>;

/** One failover attempt: the endpoint that answers (aggregated or decode pod) and, for P/D, its prefill pod. */
export const AttemptSchema = z.object({
  endpoint: EndpointRefSchema,
  prefill: EndpointRefSchema.optional(),
  /**
   * EPD: the DP rank of this attempt's EC consumer (the prefill, else `endpoint`), chosen before any encode leg
   * starts, when that consumer has more than one rank. Encoders push to that rank's control address and the
   * consumer gets `X-data-parallel-rank`.
   */
  consumerDpRank: z.number().int().min(0).optional(),
});
export type Attempt = z.infer<typeof AttemptSchema>;

/** The encoder chosen for one media item, with alternates in order of preference. */
export const EncoderChoiceSchema = z.object({
  item: z.number().int().min(0),
  endpoint: EndpointRefSchema,
  alternates: z.array(EndpointRefSchema),
  /** True when the item's content key chose this encoder (it encoded the same content before). */
  affinity: z.boolean(),
});
export type EncoderChoice = z.infer<typeof EncoderChoiceSchema>;

/**
 * A stage this request skips because it had no usable endpoint, and the engine's shortcut serves it instead
 * (docs/reliability.md, *Stage fallback*): `none_ready` (no ready endpoint), `all_ejected` (every one ejected by
 * outlier detection), `all_failed` (every try of this request on the stage failed; set by the gateway).
 */
export const StageFallbackSchema = z.object({
  stage: z.enum(['encode', 'prefill']),
  reason: z.enum(['none_ready', 'all_ejected', 'all_failed']),
});
export type StageFallback = z.infer<typeof StageFallbackSchema>;

/**
 * Per-request disaggregation: where this request's optional stages run. `encode` (epd requests with media):
 * `remote` = the encoders in `encoders`, `local` = the consumer (the prefill, else the decode endpoint) encodes the
 * raw media itself and `encoders` is empty. `prefill` (pd/epd): `remote` = each attempt's `prefill`, `local` = the
 * decode endpoint prefills the request itself (attempts carry no prefill). `reason` says why, in words.
 */
export const DisaggregationSchema = z.object({
  encode: z.enum(['remote', 'local']).optional(),
  prefill: z.enum(['remote', 'local']).optional(),
  reason: z.string(),
  /** Predicted TTFT of each option considered, ms (e.g. `remote-prefill`, `local-prefill`, `remote-encode`, `local-encode`). */
  predictedTtftMs: z.record(z.string(), z.number()).optional(),
  /** Stages skipped because they had no usable endpoint (a shortcut the engine supports serves them). */
  fallback: z.array(StageFallbackSchema).optional(),
});
export type Disaggregation = z.infer<typeof DisaggregationSchema>;

/** Per-endpoint reasoning, returned when the request set `explain`. */
export const ExplanationSchema = z.object({
  profiles: z.array(
    z.object({
      /** aggregated | decode | prefill | encode */
      profile: z.string(),
      group: z.string().optional(),
      item: z.number().int().optional(),
      /**
       * What decided the first choice, per pick (one for aggregated, decode and prefill; one per media item for
       * encode): the scorer that gave it its largest weighted lead over the runner-up, `tie-break`,
       * `only-candidate`, or an affinity picker's name.
       */
      decider: z.array(z.string()).optional(),
      /** Affinity scorers (or the affinity picker) whose choice the load bound overruled in this run. */
      overruledByLoad: z.array(z.string()).optional(),
      endpoints: z.array(
        z.object({
          key: z.string(),
          /** Name of the filter that removed this endpoint, if one did. */
          filteredBy: z.string().optional(),
          scores: z.record(z.string(), z.number()),
          final: z.number(),
        }),
      ),
    }),
  ),
  /** The per-request disaggregation choice with every option's predicted TTFT (pd/epd). */
  disaggregation: DisaggregationSchema.optional(),
});
export type Explanation = z.infer<typeof ExplanationSchema>;

export const DecisionSchema = z.object({
  id: z.string(),
  ok: z.literal(true),
  mode: PipelineModeSchema,
  /** Ordered failover list (topN); attempt 0 is the choice. */
  attempts: z.array(AttemptSchema).min(1),
  /** One entry per media item for epd requests; empty otherwise (text-only epd requests skip encode). */
  encoders: z.array(EncoderChoiceSchema),
  explanation: ExplanationSchema.optional(),
  /** pd/epd: which optional stages this request skips and why (absent: every stage of the mode runs). */
  disaggregation: DisaggregationSchema.optional(),
  /** Which scheduler instance decided (for debugging and metrics). */
  decidedBy: z.string().optional(),
});
export type Decision = z.infer<typeof DecisionSchema>;

/** A request the scheduler could not place; `code` is an ErrorCode (SCHED_*). */
export const DecisionErrorSchema = z.object({
  id: z.string(),
  ok: z.literal(false),
  code: z.string(),
  message: z.string(),
});
export type DecisionError = z.infer<typeof DecisionErrorSchema>;

export const DecisionOrErrorSchema = z.discriminatedUnion('ok', [DecisionSchema, DecisionErrorSchema]);
export type DecisionOrError = z.infer<typeof DecisionOrErrorSchema>;

/** Body of a `triad.v1.schedule` request: a batch coalesced by one gateway. */
export const ScheduleBatchSchema = z.object({
  v: z.literal(SCHEMA_VERSION),
  requests: z.array(SchedulingRequestSchema).min(1).max(SchedulingLimits.maxBatch),
});
export type ScheduleBatch = z.infer<typeof ScheduleBatchSchema>;

/** Reply: decisions in request order, or one error for a batch that could not be read at all. */
export const ScheduleBatchReplySchema = z.union([
  z.object({ v: z.literal(SCHEMA_VERSION), decisions: z.array(DecisionOrErrorSchema) }),
  z.object({ v: z.literal(SCHEMA_VERSION), error: z.object({ code: z.string(), message: z.string() }) }),
]);
export type ScheduleBatchReply = z.infer<typeof ScheduleBatchReplySchema>;
