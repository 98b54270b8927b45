import type { AffinityRecord } from '@triad/bus';
import { z } from 'zod';
import {
  definePlugin,
  type CycleContext,
  type EndpointAware,
  type PluginDefinition,
  type PostScheduleHook,
  type Scorer,
} from '../../framework/plugin';
import type { Candidates } from '../../framework/candidates';
import type { Endpoint } from '../../state/endpoint';
import type { KvBlockIndex } from '../../state/kv-block-index';
import type { KeyAgreement } from '../../state/key-agreement';
import { PrefixCacheParamsSchema, PrefixCacheScorer } from '../prefix-cache/prefix-cache';

export const PRECISE_PREFIX_CACHE = 'precise-prefix-cache';
/** Kthena's name for its engine-event scorer; accepted as an alias with its arguments. */
const KVCACHE_AWARE = 'kvcache-aware';

/** vLLM `--prefix-caching-hash-algo` values the gateway can reproduce. */
const KvHashAlgoSchema = z.enum(['sha256', 'sha256_cbor', 'xxhash', 'xxhash_cbor']);

/**
 * Where the gateway gets a request's token ids: `local` (the tokenizer files at `path`), `engine` (the engine's own
 * tokenize endpoint, the local tokenizer as fallback when `path` is set), `engine-only` (no fallback).
 */
export const TokenSourceSchema = z.enum(['local', 'engine', 'engine-only']);
export type TokenSource = z.infer<typeof TokenSourceSchema>;

export const TokenizerRefSchema = z
  .object({
    /** Model name as the engine sees it (ModelServer.spec.model, or the request model); `*` matches any. */
    model: z.string().min(1).optional(),
    /** A ModelServer (`namespace/name`); matched before `model`. */
    modelServer: z
      .string()
      .regex(/^[^/]+\/[^/]+$/, 'namespace/name')
      .optional(),
    /** A `tokenizer.json` file, or a directory holding it (and tokenizer_config.json, chat_template.jinja, …). */
    path: z.string().min(1).optional(),
    /** Where tokenizer_config.json, chat_template.jinja/json and preprocessor_config.json are, when not beside `path`. */
    configDir: z.string().min(1).optional(),
    /** Default: `local` with a `path`, else `engine`. */
    source: TokenSourceSchema.optional(),
    /**
     * vLLM's endpoint for `engine`: `tokenize` (POST /tokenize, chat template applied by the engine) or `render`
     * (POST /v1/chat/completions/render: token ids with multimodal hashes and placements; vLLM's scale-out endpoints,
     * `vllm launch render` or VLLM_ENABLE_SCALE_OUT_ENDPOINTS=1). SGLang always uses POST /tokenize.
     */
    vllmEndpoint: z.enum(['tokenize', 'render']).optional(),
    /** The engine port to call (default: the endpoint's serving port). */
    port: z.number().int().min(1).max(65535).optional(),
  })
  .strict()
  .refine((t) => t.model !== undefined || t.modelServer !== undefined, { message: 'give model or modelServer' })
  .refine((t) => t.path !== undefined || t.source !== 'local', { message: 'source local needs a path' });
export type TokenizerRef = z.infer<typeof TokenizerRefSchema>;

/** How the gateway calls the engines' tokenize endpoints. */
export const EngineTokenizationSchema = z
  .object({
    /** Past this, the request goes on with the local tokenizer (or without keys). */
    timeoutMs: z.number().int().min(1).max(10_000).default(250),
    /** Tokenize calls in flight per ModelServer; more fall back at once instead of queueing. */
    maxInFlight: z.number().int().min(1).max(4096).default(64),
    /** Rendered requests whose token ids are kept (LRU); 0 turns the cache off. */
    cacheEntries: z.number().int().min(0).max(1_000_000).default(4096),
  })
  .strict();

const Params = z
  .object({
    /** Tokens per KV block: vLLM `--block-size`, SGLang `--page-size` (Kthena: `blockSizeToHash`). */
    blockSize: z.number().int().min(1).max(1024).optional(),
    blockSizeToHash: z.number().int().min(1).max(1024).optional(),
    /** Most leading blocks hashed and matched. */
    maxBlocksToMatch: z.number().int().min(1).max(256).default(128),
    /** vLLM engines' `--prefix-caching-hash-algo` (SGLang has one fixed scheme). */
    hashAlgo: KvHashAlgoSchema.default('sha256'),
    /** vLLM engines' PYTHONHASHSEED: it seeds every block chain (unset on the engines = unreproducible hashes). */
    hashSeed: z.string().default('0'),
    /** Where the gateway finds each model's tokenizer (shipped with the image or mounted; nothing is downloaded). */
    tokenizers: z.array(TokenizerRefSchema).default([]),
    /** Arguments of the approximate `prefix-cache` scorer used for pods that publish no events. */
    fallback: PrefixCacheParamsSchema.default(PrefixCacheParamsSchema.parse({})),
    /** Engine tokenization: timeout, concurrency, cache. */
    engineTokenization: EngineTokenizationSchema.default(EngineTokenizationSchema.parse({})),
    /**
     * Kthena's tokenizer ports: the engine's tokenize endpoint is on this port of the pod (Kthena's defaults 8000 and
     * 30000 are what its docs deploy). With `kvcache-aware`, every model is tokenized by its engines, as Kthena does.
     */
    vllmTokenizerPort: z.number().int().min(1).max(65535).optional(),
    sglangTokenizerPort: z.number().int().min(1).max(65535).optional(),
  })
  .strict();

export const PrecisePrefixCacheParamsSchema = Params.transform(({ blockSizeToHash, blockSize, ...rest }) => ({
  ...rest,
  blockSize: blockSize ?? blockSizeToHash ?? 16,
}));
export type PrecisePrefixCacheParams = z.output<typeof PrecisePrefixCacheParamsSchema>;

/**
 * Scores endpoints by the longest prompt prefix their engine really holds, from the engines' KV events: the
 * gateway sends the request's block keys (`kvBlockHashes`, computed with the engines' own block hash), and an
 * endpoint whose pod has a live event source scores `matchedBlocks / blocks · 100` (Kthena kvcache-aware's formula;
 * 0 when it holds none). Endpoints of pods without events, and every endpoint of a request without block keys,
 * get the approximate `prefix-cache` score instead, whose post-schedule memory this scorer keeps too.
 */
export class PrecisePrefixCacheScorer implements Scorer, PostScheduleHook, EndpointAware {
  readonly name: string;
  readonly type: string;
  readonly params: PrecisePrefixCacheParams;
  readonly fallback: PrefixCacheScorer;
  readonly #index: KvBlockIndex;
  readonly #agreement: KeyAgreement | undefined;
  readonly #podOf = new WeakMap<Endpoint['record'], string>();

  /** Kthena's `kvcache-aware`: models without a tokenizer entry are tokenized by their engines, as Kthena does. */
  get engineByDefault(): boolean {
    return this.type === KVCACHE_AWARE;
  }

  constructor(name: string, type: string, params: PrecisePrefixCacheParams, index: KvBlockIndex, agreement?: KeyAgreement) {
    this.name = name;
    this.type = type;
    this.params = params;
    this.fallback = new PrefixCacheScorer(`${name}/fallback`, params.fallback);
    this.#index = index;
    this.#agreement = agreement;
  }

  score(ctx: CycleContext, c: Candidates, out: Float64Array): void {
    this.fallback.score(ctx, c, out);
    const keys = ctx.request.kvBlockHashes;
    if (keys === undefined || keys.length === 0) return;
    const n = Math.min(keys.length, this.params.maxBlocksToMatch);
    let byPod: Map<string, number[]> | undefined;
    for (let i = 0; i < c.size; i++) {
      const pod = this.#pod(c.endpoint(i));
      if (!this.#index.podIsLive(pod)) continue;
      out[i] = 0;
      byPod ??= new Map();
      const list = byPod.get(pod);
      if (list) list.push(i);
      else byPod.set(pod, [i]);
    }
    if (!byPod) return;
    const pods = byPod;
    this.#index.prefixMatches(
      n === keys.length ? keys : keys.slice(0, n),
      (pod, blocks) => {
        for (const i of pods.get(pod) ?? []) out[i] = (blocks / n) * 100;
      },
      this.params.blockSize,
    );
  }

  postSchedule(ctx: CycleContext, chosen: Endpoint): void {
    this.fallback.postSchedule(ctx, chosen);
    const keys = ctx.request.kvBlockHashes;
    if (keys !== undefined && keys.length > 0)
      this.#agreement?.observe(`${chosen.record.namespace}/${chosen.record.modelServer}`, keys, ctx.now);
  }

  /** Its approximate fallback learns from other replicas like `prefix-cache` does. */
  learn(record: AffinityRecord): void {
    this.fallback.learn(record);
  }

  endpointRemoved(key: string): void {
    this.fallback.endpointRemoved(key);
  }

  #pod(e: Endpoint): string {
    let pod = this.#podOf.get(e.record);
    if (pod === undefined) {
      pod = `${e.record.namespace}/${e.record.pod}`;
      this.#podOf.set(e.record, pod);
    }
    return pod;
  }
}

/** The plugin under its own name and, with the same arguments, under Kthena's `kvcache-aware`. */
export function precisePrefixCachePlugins(index: KvBlockIndex, agreement?: KeyAgreement): PluginDefinition[] {
  const make = (type: string): PluginDefinition =>
    definePlugin({
      type,
      kinds: ['scorer', 'post-schedule'],
      description:
        type === KVCACHE_AWARE
          ? `Kthena's name for ${PRECISE_PREFIX_CACHE} (same arguments; blockSizeToHash is the block size in tokens).`
          : 'Scores by the longest prefix the engine holds, from its KV events; approximate prefix-cache for pods without events.',
      params: PrecisePrefixCacheParamsSchema,
      create: (name, params) => new PrecisePrefixCacheScorer(name, type, params, index, agreement),
    });
  return [make(PRECISE_PREFIX_CACHE), make(KVCACHE_AWARE)];
}
