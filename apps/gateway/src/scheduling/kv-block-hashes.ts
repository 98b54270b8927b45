import { performance } from 'node:perf_hooks';
import type { InferenceEngine } from '@triad/crd';
import {
  UnsupportedChatError,
  VllmBlockHasher,
  loadTokenizer,
  sglangBlockKeys,
  tokenizePrompt,
  type ModelTokenizer,
  type PromptTokens,
} from '@triad/kv-events';
import type { KvHashOptions, TokenSource, TokenizerRef } from '@triad/scheduling';
import { EngineTokenizeError, engineTokenize, tokenizeApiOf } from './engine-tokenize';
import { TokenizeCache, renderKey } from './tokenize-cache';
import type { TokenizerEndpoints } from './tokenizer-endpoints';

export interface KvHashLogger {
  warn(obj: object, msg?: string): void;
}

/** How a request's token ids were obtained (`triad_gateway_kv_tokenize_*{source}`). */
export type TokenizeSource = 'local' | 'engine' | 'cache';
/**
 * What came of it: ids (`ok`), the engine failed and the local tokenizer answered (`fallback`), too many calls in
 * flight (`busy`, local answers when there is one), nothing reproducible (`unsupported`), no ids (`failed`), or a
 * prompt shorter than one block (`short`: no keys needed, no engine call made).
 */
export type TokenizeOutcome = 'ok' | 'fallback' | 'unsupported' | 'failed' | 'short' | 'busy';

export interface KvHashObserver {
  tokenized(source: TokenizeSource, outcome: TokenizeOutcome, seconds: number): void;
}

/** The request a gateway computes keys for, once it is routed. */
export interface KvKeyRequest {
  readonly engine: InferenceEngine;
  /** `namespace/name` of the ModelServer. */
  readonly server: string;
  /** The model the engine serves the request as (LoRA adapter name when one is named). */
  readonly model: string;
  readonly body: Record<string, unknown>;
  readonly lora: string | undefined;
  /** Authorization the engines get (`engineAuth`), sent with engine tokenize calls too. */
  readonly authorization?: string | undefined;
}

/**
 * Computes `SchedulingRequest.kvBlockHashes`: the request's token ids as the engine computes them, hashed into the
 * engine's block keys. Per ModelServer (the precise-prefix-cache `tokenizers` entries), ids come from the model's
 * tokenizer files in the gateway (`local`, proven equal to vLLM's rendering on the parity fixtures), or from the
 * engine's own endpoint (`engine`: vLLM POST /tokenize or /v1/chat/completions/render, SGLang POST /tokenize; with
 * a timeout, a cap on calls in flight per ModelServer, a cache keyed by what the engine renders, and the local
 * tokenizer as fallback). A prompt shorter than one block gets no keys and no engine call. Requests it cannot
 * reproduce get no keys, and the scorer falls back to its approximate score.
 */
export class KvBlockHashing {
  readonly #logger: KvHashLogger;
  readonly #endpoints: TokenizerEndpoints | undefined;
  readonly #observer: KvHashObserver | undefined;
  readonly #tokenizers = new Map<string, ModelTokenizer | null>();
  readonly #inFlight = new Map<string, number>();
  #hashers = new Map<string, VllmBlockHasher>();
  #cache = new TokenizeCache(0);
  #options: KvHashOptions | undefined;

  constructor(logger: KvHashLogger, endpoints?: TokenizerEndpoints, observer?: KvHashObserver) {
    this.#logger = logger;
    this.#endpoints = endpoints;
    this.#observer = observer;
  }

  /** Switches to the hashing of a new scheduler config (undefined: no precise scorer, nothing computed). */
  configure(options: KvHashOptions | undefined): void {
    this.#options = options;
    this.#hashers = new Map();
    this.#cache = new TokenizeCache(options?.engineTokenization.cacheEntries ?? 0);
  }

  /** Block keys for this request, or undefined when they are not needed or cannot be computed exactly. */
  async keys(req: KvKeyRequest): Promise<string[] | undefined> {
    const o = this.#options;
    if (!o) return undefined;
    const ref = matchRef(o.tokenizers, req.server, req.model);
    const source: TokenSource | undefined = ref?.source ?? (ref?.path ? 'local' : ref || o.engineByDefault ? 'engine' : undefined);
    if (!source) return undefined;
    if (req.engine === 'SGLang' && req.lora) return undefined; // SGLang namespaces LoRA blocks in ways not reproduced
    const tokens = await this.#tokens(req, o, ref, source);
    if (!tokens || tokens.ids.length < o.blockSize) return undefined;
    return this.#hash(req, o, tokens);
  }

  async #tokens(
    req: KvKeyRequest,
    o: KvHashOptions,
    ref: TokenizerRef | undefined,
    source: TokenSource,
  ): Promise<PromptTokens | undefined> {
    const local = ref?.path ? this.#tokenizer(ref.path, ref.configDir) : undefined;
    let localTokens: PromptTokens | undefined;
    let localFailed = false;
    if (local) {
      const started = performance.now();
      try {
        localTokens = tokenizePrompt(local, req.body);
      } catch (err) {
        if (!(err instanceof UnsupportedChatError)) this.#logger.warn({ error: (err as Error).message }, 'local tokenization failed');
        localFailed = true;
      }
      const outcome = localTokens ? (localTokens.ids.length < o.blockSize ? 'short' : 'ok') : 'unsupported';
      if (source === 'local' || outcome === 'short') {
        // Shorter than a block (template included): no key to compute, so no engine call either.
        this.#observer?.tokenized('local', outcome, (performance.now() - started) / 1000);
        return localTokens;
      }
    }
    const api = tokenizeApiOf(req.engine, ref?.vllmEndpoint);
    const key = renderKey(`${api}:${req.server}`, req.model, req.body);
    const cached = this.#cache.get(key);
    if (cached) {
      this.#observer?.tokenized('cache', 'ok', 0);
      return cached;
    }
    const fallback = (outcome: TokenizeOutcome, started: number): PromptTokens | undefined => {
      const useLocal = source === 'engine' && localTokens !== undefined;
      this.#observer?.tokenized('engine', useLocal && outcome !== 'busy' ? 'fallback' : outcome, (performance.now() - started) / 1000);
      return useLocal ? localTokens : undefined;
    };
    const started = performance.now();
    const target = this.#endpoints?.pick(req.server);
    const busy = (this.#inFlight.get(req.server) ?? 0) >= o.engineTokenization.maxInFlight;
    if (!target || busy) return fallback(busy ? 'busy' : 'failed', started);
    const port = ref?.port ?? (req.engine === 'SGLang' ? o.sglangTokenizerPort : o.vllmTokenizerPort) ?? target.port;
    this.#inFlight.set(req.server, (this.#inFlight.get(req.server) ?? 0) + 1);
    try {
      const tokens = await engineTokenize({
        base: `http://${target.ip.includes(':') ? `[${target.ip}]` : target.ip}:${port}`,
        api,
        model: req.model,
        body: req.body,
        timeoutMs: o.engineTokenization.timeoutMs,
        ...(req.authorization ? { headers: { authorization: req.authorization } } : {}),
      });
      this.#cache.set(key, tokens);
      this.#observer?.tokenized('engine', 'ok', (performance.now() - started) / 1000);
      return tokens;
    } catch (err) {
      const reason = err instanceof EngineTokenizeError ? err.reason : 'network';
      if (reason !== 'unsupported')
        this.#logger.warn({ server: req.server, reason, error: (err as Error).message }, 'engine tokenization failed');
      return fallback(reason === 'unsupported' || localFailed ? 'unsupported' : 'failed', started);
    } finally {
      this.#inFlight.set(req.server, (this.#inFlight.get(req.server) ?? 1) - 1);
    }
  }

  #hash(req: KvKeyRequest, o: KvHashOptions, tokens: PromptTokens): string[] | undefined {
    const max = o.maxBlocksToMatch;
    if (req.engine === 'SGLang') return tokens.mm.length > 0 ? undefined : sglangBlockKeys(tokens.ids, o.blockSize, max);
    const key = `${o.hashAlgo}\u0000${o.hashSeed}\u0000${o.blockSize}`;
    let hasher = this.#hashers.get(key);
    if (!hasher) this.#hashers.set(key, (hasher = new VllmBlockHasher({ algo: o.hashAlgo, seed: o.hashSeed, blockSize: o.blockSize })));
    const salt = typeof req.body['cache_salt'] === 'string' ? req.body['cache_salt'] : undefined;
    return hasher.keys(
      tokens.ids,
      {
        ...(req.lora ? { loraName: req.lora } : {}),
        ...(salt ? { cacheSalt: salt } : {}),
        ...(tokens.mm.length > 0 ? { mm: tokens.mm } : {}),
      },
      max,
    );
  }

  #tokenizer(path: string, configDir: string | undefined): ModelTokenizer | null {
    const key = `${path}\u0000${configDir ?? ''}`;
    if (this.#tokenizers.has(key)) return this.#tokenizers.get(key) as ModelTokenizer | null;
    let loaded: ModelTokenizer | null = null;
    try {
      loaded = loadTokenizer(path, configDir ? { configDir } : {});
    } catch (err) {
      this.#logger.warn(
        { tokenizer: path, error: (err as Error).message },
        'tokenizer unavailable; precise prefix routing falls back for its model',
      );
    }
    this.#tokenizers.set(key, loaded);
    return loaded;
  }
}

/** The tokenizer entry of a request: its ModelServer's, else its model's, else `*`. */
export function matchRef(refs: readonly TokenizerRef[], server: string, model: string): TokenizerRef | undefined {
  return refs.find((t) => t.modelServer === server) ?? refs.find((t) => t.model === model) ?? refs.find((t) => t.model === '*');
}
