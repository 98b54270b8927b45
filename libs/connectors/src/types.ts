import type { Attempt, Decision, EndpointRef, Stage } from '@triad/bus';
import type { InferenceEngine, PipelineMode } from '@triad/crd';
import type { MediaPart } from './media';

/** Names of the registered connectors (one per protocol, not per transport × mode). */
export type ConnectorName =
  | 'aggregated'
  | 'vllm-http'
  | 'vllm-nixl'
  | 'vllm-mooncake'
  | 'vllm-lmcache'
  | 'vllm-epd'
  | 'sglang-pd'
  | 'sglang-epd';

/**
 * The client side of one request: a structural subset of node's `ServerResponse`, so the gateway passes
 * `reply.raw` and the connectors write bytes straight to the socket.
 */
export interface ClientSink {
  writeHead(status: number, headers: Record<string, string | number>): unknown;
  write(chunk: Buffer | string): boolean;
  end(chunk?: Buffer | string): unknown;
  once(event: 'drain', listener: () => void): unknown;
  readonly destroyed: boolean;
  readonly headersSent: boolean;
  /** `end()` was called: nothing more may be written. */
  readonly writableEnded: boolean;
}

/** Per-stage time budgets in ms; 0 disables one. */
export interface StageTimeouts {
  /** One encoder request, headers to last byte. */
  readonly encodeMs: number;
  /** The prefill request, headers to last byte. */
  readonly prefillMs: number;
  /** From sending the final leg (aggregated or decode) to its first body byte. */
  readonly firstByteMs: number;
  /** The whole request, from arrival to the last byte. */
  readonly totalMs: number;
}

/** `trafficPolicy.retry` resolved: how many retries after the first try, and the pause before each. */
export interface RetryPolicy {
  readonly retries: number;
  readonly intervalMs: number;
}

/** What a connector needs to know about the ModelServer (resolved once per KV update, not per request). */
export interface ServerProfile {
  readonly namespace: string;
  readonly name: string;
  readonly engine: InferenceEngine;
  readonly mode: PipelineMode;
  readonly connector: ConnectorName;
  readonly retry: RetryPolicy;
  readonly timeouts: StageTimeouts;
  /** vLLM P→D: relay the prefill's `kv_transfer_params` to decode (nixl, mooncake, lmcache; not plain http). */
  readonly relayKvParams: boolean;
}

/** Token counts taken from the engine's usage (the decode's, for disaggregated requests). */
export interface Usage {
  promptTokens: number;
  completionTokens: number;
}

/** One HTTP request the gateway sends to an engine (a "leg"), as observers see it. */
export interface LegInfo {
  readonly stage: Stage;
  readonly endpoint: EndpointRef;
  /** Media item index for encode legs, else -1. */
  readonly item: number;
  /** Index into `decision.attempts` (0 for encode legs). */
  readonly attempt: number;
  readonly startedAt: number;
}

/** Outcome of one leg: `status` is the engine's HTTP status, 0 when none arrived. */
export interface LegOutcome {
  readonly ok: boolean;
  readonly status: number;
  readonly error?: Error;
}

/**
 * Receives the stage loop's events for one request. The gateway implements it once (a shared object, the
 * per-request state lives in the call) to drive metrics, dispatch events, the access log and tracing hooks.
 */
export interface StageObserver {
  /** A leg is about to be sent; the returned headers (e.g. trace context) are added to it. */
  legStart(call: ProxyCall, leg: LegInfo): Record<string, string> | undefined;
  legEnd(call: ProxyCall, leg: LegInfo, outcome: LegOutcome): void;
  /** The first response byte went to the client (the point after which nothing is retried). */
  firstByte(call: ProxyCall): void;
  /** Attempt `attempt` failed with `error` before the first byte and the next alternate will be tried. */
  retry(call: ProxyCall, attempt: number, error: Error): void;
}

/** How the request ended, filled in by the stage loop. */
export interface ProxyResult {
  status: number;
  error: Error | undefined;
  /** Index of the attempt that answered (or the last one tried). */
  attempt: number;
  /** Tries of the final leg (1 + retries). */
  tries: number;
  usage: Usage | undefined;
  /** When the first byte was written to the client (ms since epoch), 0 if never. */
  firstByteAt: number;
  /** Wall-clock ms spent per stage (sum over legs of that stage; encode legs run concurrently: their span). */
  encodeMs: number;
  prefillMs: number;
  decodeMs: number;
}

/**
 * One client request on its way through the stage loop: the parsed body (already routed and with `model`
 * rewritten), the scheduler's decision, and where to write the answer.
 */
export interface ProxyCall {
  /** x-request-id; the same id goes to prefill and decode, encoders get `id:i:hex`. */
  readonly id: string;
  /** Upstream path, e.g. `/v1/chat/completions`. */
  readonly path: string;
  /** The request body (parsed once); connectors never mutate it. */
  readonly body: Record<string, unknown>;
  /** The client asked for a stream. */
  readonly stream: boolean;
  /**
   * Add `stream_options.include_usage` for accounting (streamed chat/completions only; other paths such as
   * `/v1/responses` have no such option and are relayed as they are).
   */
  readonly injectUsage: boolean;
  /** The client asked for the usage chunk itself (else an injected one is removed again). */
  readonly clientWantsUsage: boolean;
  /** Headers forwarded to every leg (authorization, trace context), lower-case names. */
  readonly upstreamHeaders: Record<string, string>;
  /** Media parts of the request in order (only extracted for epd servers), else empty. */
  readonly media: readonly MediaPart[];
  /** SGLang EPD: `http://prefill:port` whose encoder group serves the request, when the scheduler named one. */
  readonly epdBootstrapAddr: string | undefined;
  readonly server: ServerProfile;
  readonly decision: Decision;
  readonly sink: ClientSink;
  readonly observer: StageObserver;
  /** Arrival time (ms since epoch); the total timeout counts from here. */
  readonly receivedAt: number;
  /** Filled in by the stage loop. */
  readonly result: ProxyResult;
  /** Set by the stage loop: aborts every in-flight leg (client disconnect, total timeout). */
  abort: ((reason: Error) => void) | undefined;
}

/** A connector runs the protocol of one (engine, mode, KV connector) combination. */
export interface Connector {
  readonly name: ConnectorName;
  /** Work done once per request before the attempt loop (the EPD encoder fan-out). Rejects with a StageError. */
  prepare?(call: ProxyCall, run: LegRunner): Promise<void>;
  /**
   * One try against `decision.attempts[index]`: prefill if the protocol has one, then the final leg relayed to
   * the client. Resolves when the response is complete; rejects with a StageError (which says whether any byte
   * reached the client).
   */
  attempt(call: ProxyCall, attempt: Attempt, index: number, run: LegRunner): Promise<void>;
}

/** A leg in flight: its settlement and a way to abort it alone (e.g. SGLang prefill when decode fails). */
export interface LegHandle<T> {
  readonly promise: Promise<T>;
  abort(reason: Error): void;
}

/** Sends legs for one call; owned by the stage loop so it can abort every leg at once. */
export interface LegRunner {
  /** Sends a leg and buffers the whole 2xx answer (encode, prefill); rejects on non-2xx, transport error or timeout. */
  buffered(spec: LegSpec): LegHandle<BufferedAnswer>;
  /** Sends the final leg and relays a 2xx answer to the client (SSE as it arrives); rejects like `buffered`. */
  relay(spec: LegSpec): LegHandle<void>;
  /** Sends a leg whose answer is read and thrown away (SGLang prefill); rejects like `buffered`. */
  drained(spec: LegSpec): LegHandle<void>;
  /** Writes a buffered final answer to the client (SGLang non-stream decode, once prefill also succeeded). */
  respond(answer: BufferedAnswer): void;
  /** Pauses `ms` between tries; rejects when the call is aborted meanwhile. */
  pause(ms: number): Promise<void>;
}

/** What to send on one leg. */
export interface LegSpec {
  readonly stage: Stage;
  readonly endpoint: EndpointRef;
  readonly item: number;
  readonly attempt: number;
  readonly body: string;
  readonly requestId: string;
  readonly timeoutMs: number;
  /** Path override (encoders always get `/v1/chat/completions`). */
  readonly path?: string;
}

/** A buffered 2xx answer. */
export interface BufferedAnswer {
  readonly status: number;
  readonly contentType: string;
  readonly body: Buffer;
}

export type { Attempt, Decision, EndpointRef, Stage };
