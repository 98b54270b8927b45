import { z } from 'zod';
import { Buckets } from '@triad/bus';
import { DurationSchema, RateLimitUnitSchema, parseGoDuration } from '@triad/crd';
import { ApiKeyEntrySchema } from '../auth/api-key-file';

/** A duration as a Go duration string (`250ms`, `5m`) or a number of milliseconds; parsed to milliseconds. */
const DurationMsSchema = z
  .union([z.number().nonnegative(), DurationSchema])
  .transform((v) => (typeof v === 'number' ? v : (parseGoDuration(v) as number)));

/** A token limit in the shape of `ModelRoute.spec.rateLimit` (without `global`): used by tiers and identities. */
const TokenLimitSchema = z
  .object({
    inputTokensPerUnit: z.number().int().min(1).optional(),
    outputTokensPerUnit: z.number().int().min(1).optional(),
    unit: RateLimitUnitSchema.default('minute'),
  })
  .strict();
export type TokenLimit = z.infer<typeof TokenLimitSchema>;

/** Kthena's `auth` keys (issuer, audiences, jwksUri) plus Triad's API keys and JWT options. */
const AuthConfigSchema = z
  .object({
    issuer: z.string().min(1).optional(),
    audiences: z.array(z.string().min(1)).optional(),
    jwksUri: z.url().optional(),
    jwt: z
      .object({
        /** Claim naming the user (fairness and per-user limits); Kthena uses `sub`. */
        userClaim: z.string().default('sub'),
        /** Claim holding the rate-limit tier name, if any. */
        tierClaim: z.string().optional(),
        /** Claim listing the models the token may use (array or space-separated string); absent: all models. */
        modelsClaim: z.string().optional(),
        clockTolerance: DurationMsSchema.default(30_000),
        /** Smallest interval between two JWKS fetches triggered by an unknown `kid` (bounds refetch storms). */
        jwksCooldown: DurationMsSchema.default(30_000),
        /** A fetched key set is refetched after this age even when every `kid` is known. */
        jwksMaxAge: DurationMsSchema.default(600_000),
        jwksTimeout: DurationMsSchema.default(5_000),
      })
      .strict()
      .prefault({}),
    apiKeys: z
      .object({
        /** YAML or JSON file (e.g. a mounted Kubernetes Secret) holding `keys:`; watched and hot-reloaded. */
        file: z.string().min(1).optional(),
        keys: z.array(ApiKeyEntrySchema).default([]),
        /** Accepted so older configs still load; unused: the key file is watched (`watchFile`), not polled. */
        reloadInterval: DurationMsSchema.optional(),
        /** Verified keys remembered in memory (by SHA-256 of the key) so scrypt runs once per key, not per request. */
        cacheSize: z.number().int().min(1).default(10_000),
      })
      .strict()
      .prefault({}),
    /** Let requests without credentials through as `anonymous` even when keys or JWT are configured. */
    allowAnonymous: z.boolean().default(false),
  })
  .strict();

const LeaseConfigSchema = z
  .object({
    /** Upper bound of one replica's lease, as a fraction of the limit per unit. 0 disables leases. */
    maxFraction: z.number().min(0).max(1).default(0.1),
    /** Lifetime of a lease; a replica returns or renews it before then. */
    ttl: DurationMsSchema.default(2_000),
    /** How long a replica that finds the budget held by others' leases waits for them to be returned. */
    reclaimWait: DurationMsSchema.default(250),
    /** Clock skew tolerated between replicas before an expired lease is taken back. */
    skewMargin: DurationMsSchema.default(1_000),
  })
  .strict();

const StoreConfigSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('auto') }).strict(),
  z
    .object({
      type: z.literal('nats'),
      bucket: z
        .string()
        .regex(/^[A-Za-z0-9_-]+$/)
        .default(Buckets.admission),
    })
    .strict(),
  z.object({ type: z.literal('redis'), address: z.string().min(1), keyPrefix: z.string().default('triad:admission:') }).strict(),
  z.object({ type: z.literal('memory') }).strict(),
]);

const RateLimitConfigSchema = z
  .object({
    /** When the shared budget store cannot be reached: admit (`open`) or answer 503 (`closed`). */
    failMode: z.enum(['open', 'closed']).default('open'),
    /** Output tokens reserved for a request without `max_tokens`. */
    defaultMaxTokens: z.number().int().min(0).default(1024),
    /** Debt carried into the next window is at most this many units' worth of the limit (bounded negative balance). */
    maxDebtUnits: z.number().min(0).default(1),
    store: StoreConfigSchema.default({ type: 'auto' }),
    /** Key prefix for `ModelRoute.spec.rateLimit.global.redis` stores. */
    redisKeyPrefix: z.string().default('triad:admission:'),
    lease: LeaseConfigSchema.prefault({}),
    /** Timeout of one store operation; after it the request is decided by `failMode`. */
    storeTimeout: DurationMsSchema.default(1_000),
    /** How often stale window records are removed from the store. */
    cleanupInterval: DurationMsSchema.default(60_000),
    /** Per-identity limits are counted per (identity, model) when true, across all models when false. */
    perModel: z.boolean().default(true),
    /** API key label (or JWT claim `auth.jwt.tierClaim`) naming the tier. */
    tierLabel: z.string().default('tier'),
    defaultTier: z.string().optional(),
    tiers: z.record(z.string(), TokenLimitSchema).default({}),
    /** Overrides by identity id (`key:<name>`, `jwt:<sub>`, `tenant:<tenant>`): a tier name or explicit limits. */
    identities: z.record(z.string(), z.union([z.object({ tier: z.string() }).strict(), TokenLimitSchema])).default({}),
  })
  .strict()
  .superRefine((c, ctx) => {
    if (c.defaultTier !== undefined && !(c.defaultTier in c.tiers)) {
      ctx.addIssue({ code: 'custom', path: ['defaultTier'], message: `unknown tier '${c.defaultTier}'` });
    }
    for (const [id, v] of Object.entries(c.identities)) {
      if ('tier' in v && !(v.tier in c.tiers))
        ctx.addIssue({
          code: 'custom',
          path: ['identities', id, 'tier'],
          message: `unknown tier '${v.tier}'`,
        });
    }
  });
export type RateLimitConfig = z.infer<typeof RateLimitConfigSchema>;

/** Kthena's user-fairness queue; the defaults are Kthena's code defaults (env names in `kthena-env.ts`). */
const FairnessConfigSchema = z
  .object({
    enabled: z.boolean().default(false),
    windowSize: DurationMsSchema.default(300_000).refine((ms) => ms >= 60_000 && ms <= 3_600_000, 'must be between 1m and 1h'),
    inputTokenWeight: z.number().min(0).default(1),
    outputTokenWeight: z.number().min(0).default(2),
    priorityTokenWeight: z.number().min(0).default(1),
    priorityRequestNumWeight: z.number().min(0).default(0),
    /** Dequeue by a concurrency limit when > 0 (permits come back on release); otherwise at `maxQps` per model. */
    maxConcurrent: z.number().int().min(0).default(0),
    maxQps: z.number().positive().default(100),
    queueTimeout: DurationMsSchema.default(60_000),
    /** Waiting requests per model beyond which new ones are refused at once (0: unbounded). */
    maxQueueSize: z.number().int().min(0).default(0),
  })
  .strict();
export type FairnessConfig = z.infer<typeof FairnessConfigSchema>;

export const TokenizerConfigSchema = z
  .object({
    /** Use js-tiktoken (cl100k/o200k) for OpenAI-family model names. */
    tiktoken: z.boolean().default(true),
    /** Text beyond this many characters is estimated from the ratio measured on the first part. */
    maxChars: z.number().int().min(1).default(16_384),
    /** Local `tokenizer.json` files, by model name pattern (`*` wildcards); first match wins. */
    models: z
      .array(
        z
          .object({
            match: z.string().min(1),
            path: z.string().min(1),
            configPath: z.string().optional(),
          })
          .strict(),
      )
      .default([]),
  })
  .strict();

export const AdmissionConfigSchema = z
  .object({
    auth: AuthConfigSchema.prefault({}),
    rateLimit: RateLimitConfigSchema.prefault({}),
    fairness: FairnessConfigSchema.prefault({}),
    tokenizer: TokenizerConfigSchema.prefault({}),
    metrics: z
      .object({ userIdLabel: z.boolean().default(true) })
      .strict()
      .prefault({}),
  })
  .strict();
export type AdmissionConfig = z.infer<typeof AdmissionConfigSchema>;
export type AdmissionConfigInput = z.input<typeof AdmissionConfigSchema>;
export type AuthConfig = z.infer<typeof AuthConfigSchema>;
