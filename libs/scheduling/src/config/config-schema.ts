import { z } from 'zod';

const WeightedScorerSchema = z
  .object({
    plugin: z.string().min(1),
    weight: z.number().min(0, 'must be >= 0 (negative weights are rejected)').default(1),
  })
  .strict();

/**
 * A scorer in a profile: `{plugin, weight}`, or just the plugin name for weight 1. (A preprocess rather than a
 * union, so a bad weight is reported at its own path instead of as "invalid input".)
 */
const ScorerRefSchema = z.preprocess((v) => (typeof v === 'string' ? { plugin: v } : v), WeightedScorerSchema) as z.ZodType<
  z.output<typeof WeightedScorerSchema>,
  string | z.input<typeof WeightedScorerSchema>
>;

/** Filters (in order), weighted scorers and a picker for one stage. Names refer to `plugins` or to plugin types. */
const ProfileConfigSchema = z
  .object({
    filters: z.array(z.string().min(1)).default([]),
    scorers: z.array(ScorerRefSchema).default([]),
    /** Defaults to `max-score`, or `encoder-affinity` in the encode profile. */
    picker: z.string().min(1).optional(),
  })
  .strict();
export type ProfileConfig = z.infer<typeof ProfileConfigSchema>;

/** A configured plugin instance: its type, an optional instance name (default: the type) and its args. */
const PluginConfigSchema = z
  .object({
    type: z.string().min(1),
    name: z.string().min(1).optional(),
    args: z.record(z.string(), z.unknown()).optional(),
  })
  .strict();
export type PluginConfig = z.infer<typeof PluginConfigSchema>;

/**
 * Costs the disaggregation planner predicts TTFT with (ms). The defaults are engine-sim's `realistic` profile
 * (roughly an 8B model on one GPU) plus the benchmark's hop and EC-transfer assumptions (docs/routing-benchmark.md);
 * set them to a deployment's measured figures.
 */
const DisaggregationCostsSchema = z
  .object({
    prefillMsPer1kTokens: z.number().min(0).default(50),
    prefillOverheadMs: z.number().min(0).default(2),
    encodeMsPerItem: z.number().min(0).default(30),
    kvTransferMsPer1kTokens: z.number().min(0).default(2),
    /** Moving one item's encoder output from an encoder to its consumer. */
    ecTransferMsPerItem: z.number().min(0).default(5),
    /** One extra leg (an HTTP hop and the engine's request set-up). */
    legOverheadMs: z.number().min(0).default(3),
    /** Prompt tokens one media item adds (the gateway's `inputTokens` counts text only); 576 is a LLaVA-style 24×24 grid. */
    mediaTokensPerItem: z.number().min(0).default(576),
  })
  .strict();

/**
 * Per-request disaggregation (pd/epd ModelServers): skip the encode or the prefill stage for a request when that is
 * predicted to give it a lower TTFT. Each switch applies only where the engines can serve the shortcut: local
 * encode for vLLM EPD with the `shared-storage` or `nixl` EC connector (the consumer encodes an item it was not
 * handed); skip prefill for vLLM whose KV connector relays `kv_transfer_params` (a decode pod without them runs
 * a local prefill). Never for SGLang (decode-only servers cannot prefill; the language-only prefill calls its own
 * encoders) nor Mooncake EC push or the plain `http` KV connector.
 */
export const DisaggregationConfigSchema = z
  .object({
    /**
     * EPD: let the consumer (the prefill, else the decode pod) encode a request's media itself. Off by default: in the
     * routing benchmark it lowered image-light TTFT p99 by ~10 % but raised image-heavy p99 at 95 % load (the
     * consumer's encoding delays the prefills queued behind it), docs/routing-benchmark.md.
     */
    localEncode: z.boolean().default(false),
    /** Most media items not already in the consumer's encoder cache that it encodes itself. */
    maxLocalEncodeItems: z.number().int().min(0).max(64).default(1),
    /** Items larger than this (bytes, when the gateway knows) always go to the encoders. */
    maxLocalEncodeBytes: z.number().int().min(0).default(4_000_000),
    /** PD/EPD: prefill short uncached prompts on the decode pod (no prefill leg, no KV transfer). */
    skipPrefill: z.boolean().default(true),
    /**
     * A stage with no usable endpoint (none ready, or every one ejected) falls back to the shortcut the engines
     * support (the decode prefills, the EC consumer encodes), whatever `skipPrefill` and `localEncode` say; off, such
     * a request fails with 503 (none ready) or tries the ejected endpoints (docs/reliability.md, *Stage fallback*).
     */
    stageFallback: z.boolean().default(true),
    /** Most uncached prompt tokens a decode pod prefills itself (its running decodes wait while it does). */
    maxLocalPrefillTokens: z.number().int().min(0).default(512),
    /**
     * What the decode pod's running requests lose counts against the shortcut: skipped only when the TTFT this request
     * gains exceeds `decodeStallWeight` × the local prefill × the requests in flight on the decode pod (each waits for it).
     */
    decodeStallWeight: z.number().min(0).default(0.1),
    costs: DisaggregationCostsSchema.default(DisaggregationCostsSchema.parse({})),
  })
  .strict();
export type DisaggregationConfig = z.infer<typeof DisaggregationConfigSchema>;

/**
 * The scheduler config (YAML file, or KV `triad_v1_config/scheduler`). A stage uses `profiles.<stage>`, else
 * `profiles.default`, else the built-in profile for that stage; declared `plugins` also set the args of plugins
 * the built-in profiles use, so a file with only `plugins:` tunes the defaults.
 */
export const SchedulerConfigSchema = z
  .object({
    /** Length of the ordered failover list (attempts, encoder alternates + 1). */
    topN: z.number().int().min(1).max(64).default(5),
    /** Most endpoints listed per profile in an explanation (chosen ones first). */
    explainLimit: z.number().int().min(1).max(10_000).default(50),
    plugins: z.array(PluginConfigSchema).default([]),
    disaggregation: DisaggregationConfigSchema.default(DisaggregationConfigSchema.parse({})),
    profiles: z
      .object({
        default: ProfileConfigSchema.optional(),
        aggregated: ProfileConfigSchema.optional(),
        decode: ProfileConfigSchema.optional(),
        prefill: ProfileConfigSchema.optional(),
        encode: ProfileConfigSchema.optional(),
      })
      .strict()
      .default({}),
  })
  .strict();
export type SchedulerConfig = z.infer<typeof SchedulerConfigSchema>;
