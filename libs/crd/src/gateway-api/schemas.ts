import { z } from 'zod';
import { LabelMapSchema, ObjectMetaSchema } from '../meta';
import { GATEWAY_API_GROUP, ParentReferenceSchema } from '../model-route';

// The parts of Gateway API (`gateway.networking.k8s.io/v1`) and Inference Extension
// (`inference.networking.k8s.io/v1`) objects that Triad reads in Gateway API mode. Their own CRDs validate them
// in a cluster; these schemas only check what Triad relies on and keep out what it does not read.

export const GATEWAY_API_VERSION = `${GATEWAY_API_GROUP}/v1`;
export const INFERENCE_API_GROUP = 'inference.networking.k8s.io';
export const INFERENCE_POOL_API_VERSION = `${INFERENCE_API_GROUP}/v1`;
/** InferencePool annotation naming the engine of its pods (the pool itself has no such field); default vLLM. */
export const INFERENCE_ENGINE_ANNOTATION = 'triad.io/inference-engine';

export const LabelSelectorRequirementSchema = z.object({
  key: z.string().min(1),
  operator: z.enum(['In', 'NotIn', 'Exists', 'DoesNotExist']),
  values: z.array(z.string()).optional(),
});

/** `metav1.LabelSelector`. */
export const LabelSelectorSchema = z.object({
  matchLabels: z.record(z.string(), z.string()).optional(),
  matchExpressions: z.array(LabelSelectorRequirementSchema).optional(),
});
export type LabelSelector = z.infer<typeof LabelSelectorSchema>;

export const ListenerSchema = z.object({
  name: z.string().min(1).max(253),
  hostname: z.string().min(1).max(253).optional(),
  port: z.number().int().min(1).max(65535),
  protocol: z.string().min(1),
  allowedRoutes: z
    .object({
      namespaces: z
        .object({ from: z.enum(['All', 'Same', 'Selector']).default('Same'), selector: LabelSelectorSchema.optional() })
        .optional(),
      kinds: z.array(z.object({ group: z.string().optional(), kind: z.string().min(1) })).optional(),
    })
    .optional(),
});
export type Listener = z.infer<typeof ListenerSchema>;

export const GatewaySpecSchema = z.object({
  gatewayClassName: z.string().min(1),
  listeners: z.array(ListenerSchema).min(1).max(64),
});

export const GatewaySchema = z.object({
  apiVersion: z.literal(GATEWAY_API_VERSION),
  kind: z.literal('Gateway'),
  metadata: ObjectMetaSchema,
  spec: GatewaySpecSchema,
});
export type Gateway = z.infer<typeof GatewaySchema>;

export const HttpPathMatchSchema = z.object({
  type: z.enum(['Exact', 'PathPrefix', 'RegularExpression']).default('PathPrefix'),
  value: z.string().max(1024).default('/'),
});
export type HttpPathMatch = z.infer<typeof HttpPathMatchSchema>;

export const HttpRouteMatchSchema = z.object({
  path: HttpPathMatchSchema.optional(),
  // Read only to report them: Triad (like Kthena) matches HTTPRoutes on the path alone.
  headers: z.array(z.unknown()).optional(),
  queryParams: z.array(z.unknown()).optional(),
  method: z.string().optional(),
});

export const HttpUrlRewriteSchema = z.object({
  hostname: z.string().min(1).max(253).optional(),
  path: z
    .object({
      type: z.enum(['ReplaceFullPath', 'ReplacePrefixMatch']),
      replaceFullPath: z.string().max(1024).optional(),
      replacePrefixMatch: z.string().max(1024).optional(),
    })
    .optional(),
});
export type HttpUrlRewrite = z.infer<typeof HttpUrlRewriteSchema>;

export const HttpRouteFilterSchema = z.looseObject({ type: z.string().min(1), urlRewrite: HttpUrlRewriteSchema.optional() });

export const HttpBackendRefSchema = z.object({
  group: z.string().optional(),
  kind: z.string().optional(),
  name: z.string().min(1),
  namespace: z.string().optional(),
  port: z.number().int().min(1).max(65535).optional(),
  /** Gateway API: an omitted weight is 1, a weight of 0 receives no traffic. */
  weight: z.number().int().min(0).max(1_000_000).default(1),
  filters: z.array(z.unknown()).optional(),
});

export const HttpRouteRuleSchema = z.object({
  name: z.string().optional(),
  matches: z.array(HttpRouteMatchSchema).max(64).optional(),
  filters: z.array(HttpRouteFilterSchema).optional(),
  backendRefs: z.array(HttpBackendRefSchema).optional(),
});

export const HttpRouteSpecSchema = z.object({
  parentRefs: z.array(ParentReferenceSchema).optional(),
  hostnames: z.array(z.string().min(1).max(253)).max(16).optional(),
  rules: z.array(HttpRouteRuleSchema).max(16).optional(),
});
export type HttpRouteSpec = z.infer<typeof HttpRouteSpecSchema>;

export const HttpRouteSchema = z.object({
  apiVersion: z.literal(GATEWAY_API_VERSION),
  kind: z.literal('HTTPRoute'),
  metadata: ObjectMetaSchema,
  spec: HttpRouteSpecSchema,
  status: z.unknown().optional(),
});
export type HttpRoute = z.infer<typeof HttpRouteSchema>;

export const InferencePoolSpecSchema = z.object({
  /** Pods of the pool's namespace with all these labels (the v1 selector has matchLabels only). */
  selector: z.object({ matchLabels: LabelMapSchema }),
  /** v1 allows exactly one port today; Triad uses the first. */
  targetPorts: z
    .array(z.object({ number: z.number().int().min(1).max(65535) }))
    .min(1)
    .max(8),
  /** Triad schedules the pool itself with its plugins; an Endpoint Picker reference is accepted and not used. */
  endpointPickerRef: z.unknown().optional(),
});

export const InferencePoolSchema = z.object({
  apiVersion: z.literal(INFERENCE_POOL_API_VERSION),
  kind: z.literal('InferencePool'),
  metadata: ObjectMetaSchema,
  spec: InferencePoolSpecSchema,
});
export type InferencePool = z.infer<typeof InferencePoolSchema>;
