import { z } from 'zod';
import { StringMatchSchema } from './string-match';
import { ObjectMetaSchema, ResourceStatusSchema } from './meta';
import { API_VERSION } from './model-server';

export const ParentReferenceSchema = z.object({
  group: z.string().optional(),
  kind: z.string().optional(),
  namespace: z.string().optional(),
  name: z.string().min(1),
  sectionName: z.string().optional(),
  port: z.number().int().min(1).max(65535).optional(),
});

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
  unit: RateLimitUnitSchema.default('second'),
  global: z.object({ redis: z.object({ address: z.string().min(1) }) }).optional(),
});
export type RateLimit = z.infer<typeof RateLimitSchema>;

/** Seconds in one rate-limit unit (a month is 30 days, as in Kthena). */
export const RATE_LIMIT_UNIT_SECONDS: Readonly<Record<RateLimitUnit, number>> = {
  second: 1, minute: 60, hour: 3600, day: 86_400, month: 2_592_000,
};

export const ModelRouteSpecSchema = z.object({
  modelName: z.string().optional(),
  loraAdapters: z.array(z.string()).max(10).optional(),
  parentRefs: z.array(ParentReferenceSchema).optional(),
  rules: z.array(RouteRuleSchema).max(16).optional(),
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
