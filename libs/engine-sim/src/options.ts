import { z } from 'zod';
import type { EcConnectorKind, VllmKvConnector } from './connector-kinds';

/** Which engine's wire behaviour the simulator reproduces. */
export const EngineKindSchema = z.enum(['vllm', 'sglang']);
export type EngineKind = z.infer<typeof EngineKindSchema>;

/** Disaggregated role: `both` is an ordinary aggregated engine (prefill and decode in one). */
export const SimRoleSchema = z.enum(['encode', 'prefill', 'decode', 'both']);
export type SimRole = z.infer<typeof SimRoleSchema>;

export { EcConnectorKindSchema, VllmKvConnectorSchema } from './connector-kinds';
export type { EcConnectorKind, VllmKvConnector } from './connector-kinds';

/** `zero` answers as fast as the process can (router benchmarks); `realistic` models per-role costs and batching. */
export type LatencyProfileName = 'zero' | 'realistic';

const FaultModeSchema = z.enum([
  'ok',
  'error500',
  'error429',
  'hang',
  'die-mid-stream',
  'slow-first-byte',
  'refuse',
  'lose-ec-push',
  'error-in-stream',
]);
export type FaultMode = z.infer<typeof FaultModeSchema>;

/** A fault applied to the next `count` inference requests (all of them when `count` is absent). */
export const FaultSpecSchema = z
  .object({
    mode: FaultModeSchema,
    count: z.number().int().positive().optional(),
    /**
     * `slow-first-byte`: how long the first byte is held back (default 1000 ms); `error-in-stream`: how long the
     * open stream waits before the error (default 0).
     */
    delayMs: z.number().int().nonnegative().optional(),
    /**
     * `die-mid-stream` only: the connection drops after this many output tokens were written (0: after the stream's
     * head and opening chunk); default half of the answer. At or past the answer's length it drops after the last
     * token, before the final usage chunk and `[DONE]`.
     */
    afterTokens: z.number().int().nonnegative().optional(),
  })
  .strict();
export type FaultSpec = z.infer<typeof FaultSpecSchema>;

/** Overrides of the latency model's numbers (see `latency.ts` for the defaults of each profile). */
export interface LatencyOverrides {
  encodeMsPerItem?: number;
  prefillMsPer1kTokens?: number;
  decodeMsPerToken?: number;
  kvTransferMsPer1kTokens?: number;
  maxRunning?: number;
  kvCapacityTokens?: number;
}

/**
 * The vLLM V1 engine-core model (`engineCore`, vLLM realistic or timed engines only): step-by-step scheduling with
 * a token budget, a KV block pool with prefix caching and an encoder cache (docs/engine-sim.md, *Engine core*).
 * Sizes not given come from the latency model (`maxRunning`, `kvCapacityTokens`) and vLLM's defaults.
 */
export interface EngineCoreOptions {
  /** `--max-num-seqs` (default: the latency model's `maxRunning`). */
  maxNumSeqs?: number;
  /** `--max-num-batched-tokens`, the per-step token budget (default 8192). */
  maxNumBatchedTokens?: number;
  /** Encoder cache size in embeddings (default: `max(maxNumBatchedTokens, 1024)`, vLLM's `encoder_cache_size`). */
  encoderCacheEmbeds?: number;
  /** Fixed cost of one step, ms (default 1). */
  stepOverheadMs?: number;
}

/**
 * KV-cache events as the engines publish them (vLLM `--kv-events-config`, SGLang `--kv-events-config`): the prefix
 * cache tokenizes prompts with the model's tokenizer, hashes full blocks as the engine does, and every block it
 * stores or evicts, and every reset, goes out as a msgpack `KVEventBatch` on a ZMQ PUB socket, with a ROUTER that
 * replays buffered batches. See docs/engine-sim.md.
 */
/** One KV-cache group of a simulated hybrid model. */
export const KvGroupSimOptionsSchema = z
  .object({
    blockSize: z.number().int().min(1).max(4096),
    /** vLLM `kv_cache_spec_kind`, published with the group's events. */
    kind: z.string().optional(),
    slidingWindow: z.number().int().min(1).optional(),
  })
  .strict();
export type KvGroupSimOptions = z.infer<typeof KvGroupSimOptionsSchema>;

/** A prompt (chat `messages` or completion `prompt`, as sent) and the token ids a reference computed for it. */
export const KvReferencePromptSchema = z
  .object({
    messages: z.array(z.unknown()).optional(),
    prompt: z.string().optional(),
    ids: z.array(z.number().int().min(0)),
    mm: z.array(z.object({ identifier: z.string(), offset: z.number().int().min(0), length: z.number().int().min(1) })).optional(),
  })
  .strict();

export const KvEventsSimOptionsSchema = z
  .object({
    /** PUB bind address, e.g. `tcp://*:5557` (`*` binds the sim's host); DP rank r binds port + r. */
    endpoint: z.string().min(1),
    /** ROUTER bind address for replay requests (vLLM `replay_endpoint`); DP rank r binds port + r. */
    replayEndpoint: z.string().min(1).optional(),
    /** Topic frame of every message (vLLM `topic`, default ''). */
    topic: z.string().optional(),
    /** Batches kept for replay (vLLM `buffer_steps`, default 10 000). */
    bufferSteps: z.number().int().positive().optional(),
    /** The model's `tokenizer.json` (file or directory; `tokenizer_config.json` beside it gives the chat template). */
    tokenizer: z.string().min(1),
    /** Tokens per block: vLLM `--block-size`, SGLang `--page-size`. Default 16. */
    blockSize: z.number().int().min(1).max(1024).optional(),
    /** vLLM `--prefix-caching-hash-algo`. Default `sha256`. */
    hashAlgo: z.enum(['sha256', 'sha256_cbor', 'xxhash', 'xxhash_cbor']).optional(),
    /** vLLM PYTHONHASHSEED (seeds every block chain). Default `0`. */
    hashSeed: z.string().optional(),
    /** Where tokenizer_config.json / chat templates live, when not beside `tokenizer`. */
    tokenizerConfig: z.string().min(1).optional(),
    /**
     * A hybrid model's KV-cache groups (vLLM only), in `group_idx` order: each group's blocks are `blockSize` of its
     * own, a multiple of the chain's `blockSize` (vLLM's hash_block_size), and are published with `group_idx`.
     */
    groups: z.array(KvGroupSimOptionsSchema).min(1).max(8).optional(),
    /** Prompts whose token ids (and multimodal items) come from a reference instead of the tokenizer (tests). */
    references: z.array(KvReferencePromptSchema).optional(),
  })
  .strict();
export type KvEventsSimOptions = z.infer<typeof KvEventsSimOptionsSchema>;

/** The subset of a pino logger the simulator uses; it logs only life-cycle events and failures, never per request. */
export interface SimLogger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
  debug(obj: object, msg?: string): void;
}

export interface SimEngineOptions {
  readonly engine: EngineKind;
  readonly role: SimRole;
  /**
   * The engine's `--api-key`: requests it checks (vLLM: `/v1` paths; SGLang: all but health and metrics) without
   * `Authorization: Bearer <key>` get 401 `{"error":"Unauthorized"}`. Absent: no check.
   */
  readonly apiKey?: string;
  /** Listen address; any 127.x.y.z loopback works. Default 127.0.0.1. */
  readonly host?: string;
  /**
   * Address announced to peers (vLLM `remote_host`, SGLang `prefill_host`); default `host`, or the first external
   * IPv4 when `host` is 0.0.0.0.
   */
  readonly advertiseHost?: string;
  /** 0 or absent picks a free port. */
  readonly port?: number;
  /**
   * vLLM: the instance's `engine_id` (`--kv-transfer-config`), which a router given it up front names to the decode
   * (vLLM's NIXL push proxy demo takes it on its command line). Default: a random UUID, as vLLM picks.
   */
  readonly engineId?: string;
  /** Served model name. Default `sim-model`. */
  readonly model?: string;
  readonly latencyProfile?: LatencyProfileName;
  /** Fine-tuning of the latency model (tests use small realistic numbers). */
  readonly latency?: LatencyOverrides;
  /** vLLM shared-storage EC connector directory (`shared_storage_path`). Without it, EC lookups always miss. */
  readonly sharedEcDir?: string;
  /** vLLM EC connector of an encoder or EC consumer (prefill, both). Default `shared-storage` (with `sharedEcDir`). */
  readonly ecConnector?: EcConnectorKind;
  /** vLLM `--enable-mm-embeds`: accept `image_embeds`/`audio_embeds`/`video_embeds` parts (else 400, as vLLM). */
  readonly enableMmEmbeds?: boolean;
  /**
   * vLLM Mooncake EC consumer: base port of its control listeners (`reservation_zmq_port`); DP rank r listens on
   * port + r. 0 or absent picks a free port per rank (read them from `ecControlAddresses`); the CLI defaults to 14579.
   */
  readonly ecControlPort?: number;
  /** vLLM Mooncake EC consumer: how long a request waits for an item's push (`push_wait_timeout_s`). Default 60 000 ms. */
  readonly ecPushWaitTimeoutMs?: number;
  /** Serves `/admin/*` (fault injection, request log, counters). */
  readonly admin?: boolean;
  readonly fault?: FaultSpec;
  /** SGLang prefill bootstrap server port; 0 or absent picks a free port (the CLI defaults to 8998 like SGLang). */
  readonly bootstrapPort?: number;
  /**
   * SGLang decode: how long to wait for the prefill to register the room (SGLang's
   * `SGLANG_DISAGGREGATION_WAITING_TIMEOUT`, 300 s upstream); also how long a PD request with `n > 1` hangs before it
   * fails on either side. Default 30 000 ms.
   */
  readonly bootstrapTimeoutMs?: number;
  /** SGLang EPD prefill (`--language-only`): serves the encoder registry and calls `/encode` itself. */
  readonly languageOnly?: boolean;
  /** SGLang `--encoder-urls`: encoders registered at start (language-only prefill). */
  readonly encoderUrls?: readonly string[];
  /**
   * SGLang language-only: port of the encoder registry listener (`--encoder-bootstrap-port`), separate from `port`;
   * 0 or absent picks a free port (the CLI defaults to 8997 like SGLang).
   */
  readonly encoderBootstrapPort?: number;
  /**
   * SGLang language-only: registry health-probe period (`SGLANG_ENCODER_BOOTSTRAP_HEALTH_CHECK_INTERVAL`). Default
   * 10 000 ms; 0 disables.
   */
  readonly encoderHealthCheckIntervalMs?: number;
  /** SGLang language-only: one health probe's budget. Default 2 000 ms. */
  readonly encoderHealthCheckTimeoutMs?: number;
  /** SGLang language-only: how long an evicted encoder keeps being probed for revival. Default 600 000 ms; 0 = forever. */
  readonly encoderEvictedTtlMs?: number;
  /**
   * SGLang language-only: the model kept its vision tower (Qwen-VL does), so with no encoder registered a multimodal
   * request is encoded locally (counter `localEncodes`); false fails it, as for models whose tower is dropped.
   * Default true.
   */
  readonly visionTower?: boolean;
  /**
   * SGLang `--load-balance-method`: how a request without a pinned DP rank picks one. `auto` (default) is
   * `follow_bootstrap_room` (room % dp) on a prefill and `round_robin` elsewhere.
   */
  readonly loadBalanceMethod?: 'auto' | 'follow_bootstrap_room' | 'round_robin';
  /** Extra model ids (LoRA adapters) listed in `/v1/models` and accepted as `model`. */
  readonly loraAdapters?: readonly string[];
  /** Data-parallel ranks: one metrics series per rank (vLLM `engine="0"`.., SGLang `dp_rank`). Default 1. */
  readonly dataParallel?: number;
  /**
   * vLLM `--runner`: `generate` (default) serves chat, completions and the Responses API; `pooling` serves
   * `/v1/embeddings` instead (an embedding model), and a generative path answers FastAPI's 404, as vLLM registers
   * only its supported tasks' routes.
   */
  readonly runner?: 'generate' | 'pooling';
  /** vLLM pooling runner: length of an embedding (the model's hidden size). Default 32. */
  readonly embeddingSize?: number;
  /** `max_model_len` reported in `/v1/models` and enforced on prompt + max_tokens. Default 32768. */
  readonly maxModelLen?: number;
  /**
   * vLLM: how long a prefill holds KV for its decode (NIXL's lease, `VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT`, the push
   * lease), and how long a Mooncake or push decode waits for it. Default 30 000 ms (vLLM: 480 s for Mooncake).
   */
  readonly kvLeaseMs?: number;
  /**
   * vLLM `--sse-keep-alive-interval`, in ms: a streamed answer idle that long gets a `: keep-alive` comment. 0 or
   * absent: off (vLLM's default).
   */
  readonly sseKeepAliveIntervalMs?: number;
  /** vLLM prefill/decode: the KV connector it runs. Default `nixl`. */
  readonly kvConnector?: VllmKvConnector;
  /**
   * vLLM decode: what a failed remote KV load does (`kv_load_failure_policy`): `fail` the request (vLLM's default; a
   * 500, or an error event once the stream is open) or `recompute` the prompt locally (counted).
   */
  readonly kvLoadFailurePolicy?: 'fail' | 'recompute';
  /** `kvConnector: lmcache`: the shared backend's name (instances with the same name share it). Default `default`. */
  readonly lmcacheStore?: string;
  /**
   * Most recent requests kept for `requests()` and `/admin/log`. Default 10 000; 0 keeps none (load generators:
   * the log holds every body, which a long benchmark pays for in garbage collection).
   */
  readonly requestLogLimit?: number;
  /**
   * vLLM decode: how a NIXL pull reaches the prefill. `http` (default): `POST /sim/nixl/pull` on the prefill's
   * port, the simulator's stand-in for NIXL's side channel. `in-process`: when the prefill named by
   * `remote_host:remote_port` runs in this process and was started with the same option, its block store is
   * asked directly — the same checks (engine id, request id, block ids), blocks freed, `kvPullsServed` on the
   * prefill — without an HTTP exchange (counted in `kvPullsInProcess`); any other prefill is pulled over HTTP.
   * For benchmarks, where the side channel's HTTP cost is the stand-in engines', not the router's. The same holds
   * for the NIXL EC connector's pulls (`ecConnector: 'nixl'`): an encoder in this process is asked directly.
   */
  readonly nixlSideChannel?: 'http' | 'in-process';
  /**
   * Publish KV-cache events from a token-level prefix cache (see {@link KvEventsSimOptionsSchema}). Without it the
   * prefix cache keys blocks by prompt characters and publishes nothing. Its size is `latency.kvCapacityTokens`.
   */
  readonly kvEvents?: KvEventsSimOptions;
  /**
   * vLLM only: run each rank as a vLLM V1 engine core (see {@link EngineCoreOptions}) instead of the request-level
   * latency model. Needs a timed latency model (the realistic profile, or overrides).
   */
  readonly engineCore?: EngineCoreOptions;
  readonly logger?: SimLogger;
}

/** One request as the simulator received it. */
export interface LoggedRequest {
  readonly method: string;
  readonly path: string;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  /** Parsed JSON when the body is JSON, else the raw text; undefined without a body. */
  readonly body: unknown;
  /** The body exactly as received (JSON numbers beyond 2^53, such as SGLang rooms, are exact here). */
  readonly rawBody: string;
  /** Epoch milliseconds of arrival. */
  readonly at: number;
  /** The `refuse` fault reset its connection on arrival: the engine did nothing with it. */
  readonly refused?: true;
}

export interface SimEngineHandle {
  readonly url: string;
  readonly host: string;
  readonly port: number;
  /** SGLang prefill only: the bootstrap server's port. */
  readonly bootstrapPort?: number;
  /** vLLM Mooncake EC consumer: `tcp://host:port` of each DP rank's control listener, rank order. */
  readonly ecControlAddresses?: readonly string[];
  /** SGLang language-only only: the encoder registry listener's port. */
  readonly encoderBootstrapPort?: number;
  readonly engine: EngineKind;
  readonly role: SimRole;
  readonly model: string;
  /** Every request received (oldest first, bounded by `requestLogLimit`), including `/health` and `/metrics`. */
  requests(): readonly LoggedRequest[];
  clearRequests(): void;
  setFault(fault: FaultSpec): void;
  /**
   * Protocol counters (see docs/engine-sim.md): kvPullsServed, localPrefillFallbacks, ecHits, localEncodes,
   * ecPullsServed, pushesReceived, ..., and `dpRank<i>Requests` per data-parallel rank.
   */
  counters(): Record<string, number>;
  /**
   * KV held for a peer engine that has not taken it: a vLLM prefill's blocks kept for a remote decode (until a
   * decode reads them or `kvLeaseMs` passes), an SGLang decode's pre-allocated blocks waiting for a room, an SGLang
   * prefill's computed rooms no decode has taken. Also on `/metrics` as `triad_sim_kv_held_{requests,blocks}`.
   */
  kvHeld(): { readonly requests: number; readonly blocks: number };
  /**
   * Streamed generations now waiting for their reader to drain the socket (it reported backpressure, so the engine
   * produces nothing more for them until it drains), and the output tokens they had written by then. A proxy that
   * holds the engine back for a slow client shows here.
   */
  stalledStreams(): { readonly streams: number; readonly tokensWritten: number };
  /** With `kvEvents`: each DP rank's PUB and replay addresses as bound (`*` and port 0 resolved), rank order. */
  readonly kvEventEndpoints?: readonly { readonly endpoint: string; readonly replayEndpoint: string | undefined }[];
  /**
   * Simulates an engine restart for the prefix cache: every rank forgets its blocks, and its event sequence and
   * replay buffer start over from 0, without an AllBlocksCleared (a new process does not announce the old one's end).
   */
  restartKvCache(): void;
  close(): Promise<void>;
}
