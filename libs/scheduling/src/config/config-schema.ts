import { z } from 'zod';

const WeightedScorerSchema = z.object({
  plugin: z.string().min(1),
  weight: z.number().min(0, 'must be >= 0 (negative weights are rejected)').default(1),
}).strict();

/**
 * A scorer in a profile: `{plugin, weight}`, or just the plugin name for weight 1. (A preprocess rather than a
 * union, so a bad weight is reported at its own path instead of as "invalid input".)
 */
const ScorerRefSchema = z.preprocess(
  (v) => (typeof v === 'string' ? { plugin: v } : v),
  WeightedScorerSchema,
) as z.ZodType<z.output<typeof WeightedScorerSchema>, string | z.input<typeof WeightedScorerSchema>>;

/** Filters (in order), weighted scorers and a picker for one stage. Names refer to `plugins` or to plugin types. */
const ProfileConfigSchema = z.object({
  filters: z.array(z.string().min(1)).default([]),
  scorers: z.array(ScorerRefSchema).default([]),
  /** Defaults to `max-score`, or `encoder-affinity` in the encode profile. */
  picker: z.string().min(1).optional(),
}).strict();
export type ProfileConfig = z.infer<typeof ProfileConfigSchema>;

/** A configured plugin instance: its type, an optional instance name (default: the type) and its args. */
const PluginConfigSchema = z.object({
  type: z.string().min(1),
  name: z.string().min(1).optional(),
  args: z.record(z.string(), z.unknown()).optional(),
}).strict();
export type PluginConfig = z.infer<typeof PluginConfigSchema>;

/**
 * The scheduler config (YAML file, or KV `triad_v1_config/scheduler`). A stage uses `profiles.<stage>`, else
 * `profiles.default`, else the built-in profile for that stage; declared `plugins` also set the args of plugins
 * the built-in profiles use, so a file with only `plugins:` tunes the defaults.
 */
export const SchedulerConfigSchema = z.object({
  /** Length of the ordered failover list (attempts, encoder alternates + 1). */
  topN: z.number().int().min(1).max(64).default(5),
  /** Most endpoints listed per profile in an explanation (chosen ones first). */
  explainLimit: z.number().int().min(1).max(10_000).default(50),
  plugins: z.array(PluginConfigSchema).default([]),
  profiles: z.object({
    default: ProfileConfigSchema.optional(),
    aggregated: ProfileConfigSchema.optional(),
    decode: ProfileConfigSchema.optional(),
    prefill: ProfileConfigSchema.optional(),
    encode: ProfileConfigSchema.optional(),
  }).strict().default({}),
}).strict();
export type SchedulerConfig = z.infer<typeof SchedulerConfigSchema>;
