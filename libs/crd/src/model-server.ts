import { z } from 'zod';
import { DurationSchema } from './duration';
import { crdRequired } from './crd-markers';
import { LabelMapSchema, ObjectMetaSchema, ResourceStatusSchema } from './meta';

export const API_GROUP = 'networking.serving.volcano.sh';
export const API_VERSION = `${API_GROUP}/v1alpha1`;

export const InferenceEngineSchema = z.enum(['vLLM', 'SGLang']);
export type InferenceEngine = z.infer<typeof InferenceEngineSchema>;

/** What users may write in `spec.pipelineMode`; {@link resolvePipelineMode} maps aliases to the three modes. */
export const PipelineModeInputSchema = z.enum(['aggregated', 'pd', 'epd', 'pd-disaggregated', 'vllm-epd', 'sglang-epd']);
export const PipelineModeSchema = z.enum(['aggregated', 'pd', 'epd']);
export type PipelineMode = z.infer<typeof PipelineModeSchema>;

export const KvConnectorTypeSchema = z.enum(['http', 'lmcache', 'nixl', 'mooncake']);
export type KvConnectorType = z.infer<typeof KvConnectorTypeSchema>;

/**
 * Which engine's Mooncake connector the pods run (a Triad field): upstream vLLM's MooncakeConnector (the router
 * makes a `transfer_id` and calls prefill and decode concurrently) or vllm-ascend's (NIXL-like: the prefill returns
 * `kv_transfer_params`, the decode reads them). `auto` tells them apart by asking the prefill's bootstrap server
 * `GET /query`, which only upstream vLLM serves.
 */
export const MooncakeImplementationSchema = z.enum(['auto', 'vllm', 'vllm-ascend']);
export type MooncakeImplementation = z.infer<typeof MooncakeImplementationSchema>;

/** vLLM's NIXL transfer direction (a Triad field): `pull` (NixlConnector, decode reads) or `push` (NixlPushConnector, prefill writes). */
export const NixlTransferModeSchema = z.enum(['pull', 'push']);
export type NixlTransferMode = z.infer<typeof NixlTransferModeSchema>;

// Kthena's KVConnectorSpec has only `type`; the other fields are Triad's (Kthena's schema ignores them).
export const KvConnectorSchema = z.object({
  type: KvConnectorTypeSchema.default('http'),
  implementation: MooncakeImplementationSchema.optional().meta({
    description:
      "type mooncake: the pods' Mooncake connector, upstream vLLM's (`vllm`) or vllm-ascend's (`vllm-ascend`); " +
      "default `auto` asks each prefill's bootstrap server (GET /query answers only on upstream vLLM)",
  }),
  transferMode: NixlTransferModeSchema.optional().meta({
    description: 'type nixl: `push` for NixlPushConnector (prefill and decode are called concurrently); default `pull`',
  }),
});
export type KvConnector = z.infer<typeof KvConnectorSchema>;

const PortSchema = z.number().int().min(1).max(65535);

/**
 * vLLM EC (encoder-cache) connectors of an EPD deployment: `shared-storage` (ECExampleConnector, a shared
 * directory), `nixl` (ECCPUConnector with P2P NIXL: the consumer pulls from the encoder) and `mooncake`
 * (ECMooncakeConnector: the encoder pushes to the consumer's control address).
 */
export const EcConnectorTypeSchema = z.enum(['shared-storage', 'nixl', 'mooncake']);
export type EcConnectorType = z.infer<typeof EcConnectorTypeSchema>;

/** Whether the EC connector pushes to a consumer the router must name before encoding (Mooncake). */
export function isPushEcConnector(type: EcConnectorType | undefined): boolean {
  return type === 'mooncake';
}

/** Triad's default bound on the images one encoder request carries (`ecConnector.maxEncoderBatch`). */
export const DEFAULT_MAX_ENCODER_BATCH = 16;
/** Triad's default number of re-encodes after a consumer 500 with a push connector (vLLM's `--decode-retries`). */
export const DEFAULT_REENCODE_ATTEMPTS = 1;

// A Triad field (Kthena has none): still a valid ModelServer for Kthena's schema, which ignores it.
export const EcConnectorSchema = z.object({
  type: EcConnectorTypeSchema.default('shared-storage').meta({ description: 'vLLM EC connector of the EPD pods' }),
  enableMmEmbeds: z.boolean().default(false).meta({
    description: 'P/PD/D run --enable-mm-embeds: media parts are rewritten to metadata-only *_embeds references',
  }),
  maxEncoderBatch: z.number().int().min(0).max(64).default(DEFAULT_MAX_ENCODER_BATCH).meta({
    description: 'Most images in one encoder request (images the scheduler sends to the same encoder are batched); 0 = no bound',
  }),
  reencodeAttempts: z.number().int().min(0).max(8).default(DEFAULT_REENCODE_ATTEMPTS).meta({
    description: 'Push connectors: re-encodes (fresh transfer ids) after a prefill/decode 500 before the first byte',
  }),
});
export type EcConnector = z.infer<typeof EcConnectorSchema>;

// Kthena's CRD requires groupKey, prefillLabels and decodeLabels in a pdGroup, and so does the generated CRD
// (crdRequired). Here they stay optional, with no length bounds Kthena lacks: the semantic rules say what each
// pipeline mode needs, in Triad's words (E→PD writes `prefillLabels: {}`).
export const PdGroupSchema = z.object({
  groupKey: z.string().meta({ description: 'Pod label whose value names the PD group' }),
  encodeLabels: LabelMapSchema.optional().meta({ description: 'Labels of encode pods (pipelineMode epd)' }),
  prefillLabels: LabelMapSchema.optional().meta({
    description: 'Labels of prefill pods; {} for epd without a prefill stage (E→PD)',
    ...crdRequired,
  }),
  decodeLabels: LabelMapSchema.optional().meta({ description: 'Labels of decode pods', ...crdRequired }),
});

export const WorkloadSelectorSchema = z.object({
  /** Not required by Kthena's CRD either; a semantic rule requires at least one label (as Kthena's webhook does). */
  matchLabels: LabelMapSchema.optional(),
  pdGroup: PdGroupSchema.optional(),
});

export const WorkloadPortSchema = z.object({
  port: PortSchema,
  protocol: z.enum(['http', 'https']).default('http'),
  encodePort: PortSchema.optional().meta({ description: 'Port of encode pods (defaults to port)' }),
  prefillPort: PortSchema.optional().meta({ description: 'Port of prefill pods (defaults to port)' }),
  decodePort: PortSchema.optional().meta({ description: 'Port of decode pods (defaults to port)' }),
});

export const RetryPolicySchema = z.object({
  /** Retries after the first try; a semantic rule refuses negative counts (Kthena's CRD bounds nothing). */
  attempts: z.number().int().optional(),
  retryInterval: DurationSchema.default('100ms'),
});

/**
 * Triad's addition (not in Kthena): outlier ejection per endpoint and stage, shared by every gateway and scheduler
 * replica. Enabled with these defaults when absent; `consecutiveErrors: 0` turns it off.
 */
export const OutlierDetectionSchema = z.object({
  consecutiveErrors: z.number().int().min(0).max(1000).optional().meta({
    description:
      'Consecutive 5xx answers, connect failures or stage timeouts of one endpoint in one stage that eject it (default 5; 0 = off)',
  }),
  baseEjectionTime: DurationSchema.optional().meta({ description: 'First ejection; each further one doubles it (default 10s)' }),
  maxEjectionTime: DurationSchema.optional().meta({ description: 'Longest ejection (default 300s)' }),
  maxEjectionPercent: z.number().int().min(0).max(100).optional().meta({
    description: 'Most endpoints of one stage and group ejected at once, in percent; never all of them (default 50)',
  }),
  probe: z
    .object({
      path: z
        .string()
        .max(256)
        .regex(/^\/[!-~]*$/)
        .default('/health')
        .meta({ description: 'Path of the GET sent to an ejected endpoint (default /health; /v1/models works too)' }),
      interval: DurationSchema.optional().meta({ description: 'Time between probes of one ejected endpoint (default 5s)' }),
      timeout: DurationSchema.optional().meta({ description: 'How long a probe may take (default 1s)' }),
    })
    .optional()
    .meta({
      description:
        'Active probing of ejected endpoints: a 2xx answer ends the ejection early (Triad field; absent = only real traffic probes)',
    }),
  panicThreshold: z.number().int().min(0).max(100).optional().meta({
    description:
      'Healthy share of one stage and group, in percent, below which ejection is ignored and every endpoint is a candidate again (default 50; 0 = never)',
  }),
});

/**
 * Triad's addition (not in Kthena): a streamed answer whose final leg (aggregated or decode) breaks after bytes
 * reached the client is continued on another pod, the text already sent given to the engine as the start of the
 * answer, and spliced into the same stream (docs/reliability.md). Off unless this object is present.
 */
export const StreamResumeSchema = z.object({
  enabled: z.boolean().default(true).meta({ description: 'Resume streams broken mid-answer (default true once streamResume is set)' }),
  maxTokens: z.number().int().min(0).max(1_000_000).optional().meta({
    description: 'Resume only while at most this many completion tokens were sent (default 4096)',
  }),
  maxBytes: z.number().int().min(0).max(16_777_216).optional().meta({
    description: 'Resume only while at most this many bytes of answer text were sent (default 65536; the gateway holds them)',
  }),
  maxResumes: z.number().int().min(1).max(8).optional().meta({ description: 'Resumes of one request (default 1)' }),
});

export const TrafficPolicySchema = z.object({
  timeout: DurationSchema.optional(),
  retry: RetryPolicySchema.optional(),
  outlierDetection: OutlierDetectionSchema.optional(),
  streamResume: StreamResumeSchema.optional(),
});

/**
 * Triad's addition (not in Kthena): the gateway's connections per endpoint of this ModelServer. A request beyond
 * the limit waits in the gateway (a metric, bounded by the stage budget), so the default sits well above an
 * engine's batch and the queue forms inside the engine, where the scheduler sees it.
 */
export const ConnectionPoolSchema = z.object({
  maxConnections: z.number().int().min(1).max(65536).optional().meta({
    description: "Requests in flight per endpoint from one gateway replica (default: the gateway's --upstream-connections, 1024)",
  }),
});

/**
 * Triad's addition (not in Kthena): what `Authorization` the engine legs carry. By default none: the client's
 * credential (a Triad API key or JWT admission checked) is for the gateway, and an engine must not receive it.
 */
/** A name of an engine credential the gateway holds (one path segment: no `/`, not `.` or `..`). */
export const ENGINE_CREDENTIAL_NAME = /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;

/** A key of a Secret in the ModelServer's own namespace (no `namespace` field: a spec cannot reach another namespace's Secrets). */
export const EngineSecretRefSchema = z.object({
  name: z.string().min(1).max(253).meta({ description: "Secret name, in the ModelServer's namespace" }),
  key: z.string().min(1).max(253).meta({ description: 'Key within the Secret' }),
});
export type EngineSecretRef = z.infer<typeof EngineSecretRefSchema>;

export const EngineAuthSchema = z.object({
  passThrough: z.boolean().default(false).meta({
    description: "Forward the client's Authorization header to every engine leg (for engines that check it themselves)",
  }),
  credential: z
    .string()
    .max(253)
    .regex(ENGINE_CREDENTIAL_NAME)
    .optional()
    .meta({
      description:
        'Name of an engine credential the gateway holds: the file <engine credentials dir>/<namespace>/<name> ' +
        '(a key of a Secret mounted into the gateway), sent as `Authorization: Bearer <contents>` on every engine leg. ' +
        'Not together with passThrough or secretRef',
    }),
  secretRef: EngineSecretRefSchema.optional().meta({
    description:
      "A key of a Secret in the ModelServer's own namespace, sent as `Authorization: Bearer <value>` on every engine leg. " +
      'The Secret must carry the label networking.serving.volcano.sh/external-model-provider-credential=true (the pod-watcher ' +
      'reads no other Secret); its value reaches the gateways sealed. Not together with passThrough or credential',
  }),
});

export const ModelServerSpecSchema = z.object({
  model: z.string().max(256).optional(),
  inferenceEngine: InferenceEngineSchema,
  pipelineMode: PipelineModeInputSchema.optional(),
  workloadSelector: WorkloadSelectorSchema,
  workloadPort: WorkloadPortSchema,
  trafficPolicy: TrafficPolicySchema.optional(),
  kvConnector: KvConnectorSchema.optional(),
  bootstrapPort: PortSchema.optional().meta({
    description: 'Prefill bootstrap port: SGLang, and vLLM with kvConnector mooncake (default 8998; a pod annotation overrides it)',
  }),
  ecConnector: EcConnectorSchema.optional().meta({ description: 'vLLM EPD encoder-cache connector (Triad field)' }),
  connectionPool: ConnectionPoolSchema.optional(),
  engineAuth: EngineAuthSchema.optional().meta({ description: 'Authorization sent to the engines (Triad field; default: none)' }),
});
export type ModelServerSpec = z.infer<typeof ModelServerSpecSchema>;

export const ModelServerSchema = z.object({
  apiVersion: z.literal(API_VERSION),
  kind: z.literal('ModelServer'),
  metadata: ObjectMetaSchema,
  spec: ModelServerSpecSchema,
  status: ResourceStatusSchema.optional(),
});
export type ModelServer = z.infer<typeof ModelServerSchema>;

/** SGLang's default `--disaggregation-bootstrap-port`. */
export const DEFAULT_SGLANG_BOOTSTRAP_PORT = 8998;
/** vLLM's default `VLLM_MOONCAKE_BOOTSTRAP_PORT`: where an upstream vLLM Mooncake prefill's bootstrap server listens. */
export const DEFAULT_MOONCAKE_BOOTSTRAP_PORT = 8998;
/**
 * Pod annotation giving the SGLang bootstrap port of one prefill pod (one value, or a list aligned with SMG's
 * `smg.ai/worker-ports`); the engine's own `/server_info` wins once the pod-watcher has read it.
 */
export const BOOTSTRAP_PORT_ANNOTATION = 'triad.io/bootstrap-port';

/**
 * The effective pipeline mode: aliases resolved, and Kthena's default when omitted (`pd` with a pdGroup,
 * else `aggregated`).
 */
export function resolvePipelineMode(spec: Pick<ModelServerSpec, 'pipelineMode' | 'workloadSelector'>): PipelineMode {
  switch (spec.pipelineMode) {
    case 'aggregated':
    case 'pd':
    case 'epd':
      return spec.pipelineMode;
    case 'pd-disaggregated':
      return 'pd';
    case 'vllm-epd':
    case 'sglang-epd':
      return 'epd';
    default:
      return spec.workloadSelector.pdGroup ? 'pd' : 'aggregated';
  }
}

/** The port a pod of `role` listens on for inference and metrics. */
export function rolePort(spec: Pick<ModelServerSpec, 'workloadPort'>, role: 'encode' | 'prefill' | 'decode' | 'aggregated'): number {
  const wp = spec.workloadPort;
  if (role === 'encode') return wp.encodePort ?? wp.port;
  if (role === 'prefill') return wp.prefillPort ?? wp.port;
  if (role === 'decode') return wp.decodePort ?? wp.port;
  return wp.port;
}
