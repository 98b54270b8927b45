import { z } from 'zod';
import { crdOptional, crdRequired } from './crd-markers';
import { StringMatchSchema } from './string-match';
import { ObjectMetaSchema, ResourceStatusSchema } from './meta';
import { API_VERSION } from './model-server';

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** Gateway API group, the default `group` of a parentRef. */
export const GATEWAY_API_GROUP = 'gateway.networking.k8s.io';

/**
 * A Gateway API ParentReference, with the bounds of Kthena's CRD (which embeds the upstream type). The API
 * server fills `group` and `kind` from the CRD's defaults; parsing leaves them out when absent (a file source
 * has no API server), and readers take an absent one as {@link GATEWAY_API_GROUP} / `Gateway`.
 */
export const ParentReferenceSchema = z.object({
  group: z
    .string()
    .max(253)
    .regex(/^$|^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/, 'must be an API group (a DNS subdomain) or empty')
    .optional()
    .meta({ default: GATEWAY_API_GROUP }),
  kind: z
    .string()
    .min(1)
    .max(63)
    .regex(/^[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?$/, 'must be a kind name')
    .optional()
    .meta({ default: 'Gateway' }),
  namespace: z
    .string()
    .min(1)
    .max(63)
    .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, 'must be a lowercase DNS-1123 label')
    .optional(),
  name: z.string().min(1).max(253),
  sectionName: z.string().min(1).max(253).regex(DNS_SUBDOMAIN, 'must be a lowercase DNS-1123 subdomain').optional(),
  port: z.number().int().min(1).max(65535).optional(),
});
export type ParentReference = z.infer<typeof ParentReferenceSchema>;

export const ModelMatchSchema = z.object({
  headers: z.record(z.string(), StringMatchSchema).optional(),
  uri: StringMatchSchema.optional(),
  body: z.object({ model: z.string().optional() }).optional(),
});

export const TargetModelSchema = z.object({
  modelServerName: z.string().optional(),
  externalModelProviderName: z.string().optional(),
  weight: z.number().int().min(0).max(100).default(100),
});
export type TargetModel = z.infer<typeof TargetModelSchema>;

export const RouteRuleSchema = z.object({
  name: z.string().optional(),
  modelMatch: ModelMatchSchema.optional(),
  targetModels: z.array(TargetModelSchema).min(1).max(16),
});
export type RouteRule = z.infer<typeof RouteRuleSchema>;

export const RateLimitUnitSchema = z.enum(['second', 'minute', 'hour', 'day', 'month']);
export type RateLimitUnit = z.infer<typeof RateLimitUnitSchema>;

export const RateLimitSchema = z.object({
  inputTokensPerUnit: z.number().int().min(1).optional(),
  outputTokensPerUnit: z.number().int().min(1).optional(),
  unit: RateLimitUnitSchema.default('second').meta(crdRequired),
  // `host:port` is a semantic rule; Kthena's CRD puts no bound on the string, nor requires `redis` (Triad does:
  // `global: {}` says nothing).
  global: z.object({ redis: z.object({ address: z.string() }).meta(crdOptional) }).optional(),
});
export type RateLimit = z.infer<typeof RateLimitSchema>;

/** Seconds in one rate-limit unit (a month is 30 days, as in Kthena). */
export const RATE_LIMIT_UNIT_SECONDS: Readonly<Record<RateLimitUnit, number>> = {
  second: 1,
  minute: 60,
  hour: 3600,
  day: 86_400,
  month: 2_592_000,
};

export const ModelRouteSpecSchema = z.object({
  modelName: z.string().optional(),
  loraAdapters: z.array(z.string()).max(10).optional(),
  parentRefs: z.array(ParentReferenceSchema).optional(),
  // Required by Kthena's CRD (crdRequired; `rules: []` is allowed); Triad reads a route without rules as one that
  // matches nothing, and `triad validate` warns that the API server refuses it.
  rules: z.array(RouteRuleSchema).max(16).optional().meta(crdRequired),
  rateLimit: RateLimitSchema.optional(),
});
export type ModelRouteSpec = z.infer<typeof ModelRouteSpecSchema>;

export const ModelRouteSchema = z.object({
  apiVersion: z.literal(API_VERSION),
  kind: z.literal('ModelRoute'),
  metadata: ObjectMetaSchema,
  spec: ModelRouteSpecSchema,
  status: ResourceStatusSchema.optional(),
});
export type ModelRoute = z.infer<typeof ModelRouteSchema>;
