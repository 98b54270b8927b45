import type { Attempt, Decision, EndpointRef, Stage } from '@triad/bus';
import type { ConnectorName, KvStrandedEvent, ProxyRequest, StageSpan, UpstreamError, Usage } from '@triad/request';

/** One HTTP request the gateway sends to an engine (a "leg"), as observers see it. */
export interface LegInfo {
  readonly stage: Stage;
  readonly endpoint: EndpointRef;
  /** Media item index for encode legs, else -1. */
  readonly item: number;
  /** Index into `decision.attempts` (the try of the item for encode legs). */
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
 * Receives the stage loop's events for one request. The gateway implements it once (a shared object; the
 * per-request state lives in the context) to drive metrics, dispatch events and the tracing hooks.
 */
export interface StageObserver {
  /**
   * A leg is about to be sent. A returned span's headers (e.g. trace context) are added to the leg, and the
   * stage loop ends the span when the leg settles, right after `legEnd`.
   */
  legStart(ctx: ProxyRequest, leg: LegInfo): StageSpan | undefined;
  legEnd(ctx: ProxyRequest, leg: LegInfo, outcome: LegOutcome): void;
  /**
   * A started leg waits for a free connection to its endpoint (`true`; every connection of the endpoint's limit
   * is busy) or stopped waiting (`false`: it got one, or gave up). It counts as in flight from `legStart` on.
   */
  legWaiting?(ctx: ProxyRequest, leg: LegInfo, waiting: boolean): void;
  /** The first response byte went to the client (the point after which nothing is retried). */
  firstByte(ctx: ProxyRequest): void;
  /** Try `attempt` failed with `error` before the first byte and the next alternate will be tried. */
  retry(ctx: ProxyRequest, attempt: number, error: Error): void;
  /** A prefill's KV was left without its decode (also in `ctx.result.kvStranded`); `event.action` says what was done. */
  kvStranded?(ctx: ProxyRequest, event: KvStrandedEvent): void;
  /** The release leg sent for a stranded hand-off settled: `ok` when the decode answered 2xx (it took the KV). */
  kvReleased?(ctx: ProxyRequest, event: KvStrandedEvent, ok: boolean, error?: Error): void;
  /**
   * A prefill of a KV connector that must return `kv_transfer_params` in the sequential flow (NIXL, vllm-ascend's
   * Mooncake) answered without them: the decode prefills the whole prompt again. The symptom of a prefill that runs
   * another connector than the ModelServer names (e.g. upstream vLLM's Mooncake, which needs the concurrent flow).
   */
  kvParamsMissing?(ctx: ProxyRequest, prefill: EndpointRef): void;
  /**
   * A stream on a ModelServer with `trafficPolicy.streamResume` broke after bytes reached the client; at the
   * request's end, how that went: `resumed` (continued on another attempt and completed), `completed` (it broke after
   * the final chunk; the gateway ended it), `failed` (resumed, then failed), `refused` (not resumable; the reason is
   * in `ctx.result.resumeRefused`).
   */
  streamResumed?(ctx: ProxyRequest, outcome: 'resumed' | 'completed' | 'failed' | 'refused'): void;
}

/**
 * A connector runs the protocol of one target kind: an (engine, mode, KV connector) combination, or an external
 * provider's API. `R` is the request it runs (engine connectors read the decision, provider connectors do not).
 */
export interface Connector<R extends ProxyRequest = ProxyRequest> {
  readonly name: ConnectorName;
  /** Work done once per request before the attempt loop (the EPD encoder fan-out). Rejects with a request error. */
  prepare?(ctx: R, run: LegRunner): Promise<void>;
  /**
   * One try against `ctx.proxy.attempts[index]`: prefill if the protocol has one, then the final leg relayed to
   * the client. Resolves when the response is complete; rejects with a request error (an `UpstreamError` says
   * whether the next alternate may be tried).
   */
  attempt(ctx: R, attempt: Attempt, index: number, run: LegRunner): Promise<void>;
  /**
   * The engine's shortcut for a stage whose tries all failed (docs/reliability.md, *Stage fallback*): an attempt
   * without that stage (the decode prefills itself), or undefined when the engines have none. `failed` holds the
   * endpoint keys that failed this request. Asked once, when the loop would otherwise give up.
   */
  fallback?(ctx: R, failure: UpstreamError, failed: ReadonlySet<string>): Attempt | undefined;
  /**
   * Ends an answer that had started with an error in the client's protocol (an Anthropic Messages stream); absent:
   * the OpenAI SSE error event plus `[DONE]`.
   */
  writeStreamError?(ctx: R, error: Error): void;
}

/** A leg in flight: its settlement and a way to abort it alone (e.g. SGLang prefill when decode fails). */
export interface LegHandle<T> {
  readonly promise: Promise<T>;
  /** Aborts the leg; a leg that already settled stays as it settled (nothing happens). */
  abort(reason: Error): void;
}

/**
 * Sends legs for one request; owned by the stage loop so it can abort every leg at once. Connectors talk to the
 * engines only through it, so a test can hand them a fake (`@triad/connectors/testing`).
 */
export interface LegRunner {
  /** Sends a leg and buffers the whole 2xx answer (encode, prefill); rejects on non-2xx, transport error or timeout. */
  buffered(spec: LegSpec): LegHandle<BufferedAnswer>;
  /** Sends the final leg and relays a 2xx answer to the client (SSE as it arrives); rejects like `buffered`. */
  relay(spec: LegSpec): LegHandle<void>;
  /** Sends a leg whose answer is read and thrown away (SGLang prefill); rejects like `buffered`. */
  drained(spec: LegSpec): LegHandle<void>;
  /**
   * Sends a final leg whose 2xx answer goes to `onData` as it arrives, never to the client (one sample of an `n > 1`
   * request the connector merges); its budget ends at the first byte, as a relay's; rejects like `buffered`.
   */
  tapped(spec: LegSpec, onData: (chunk: Buffer) => void): LegHandle<void>;
  /**
   * Writes a buffered final answer to the client (SGLang non-stream decode, once prefill also succeeded). `usage`:
   * its token counts when the connector knows better than the body says (merged samples); else read from the body.
   */
  respond(answer: BufferedAnswer, usage?: Usage): void;
  /**
   * Writes part of an event stream the connector composes (merged samples): the 200 head goes with the first part.
   * A client that reads slower than the parts come pauses every tapped leg until its side drains (as a relay's leg).
   */
  writeStream(part: Buffer): void;
  /** Ends the event stream the connector composed with `tail`; `usage`: the answer's token counts. */
  endStream(tail: Buffer, usage: Usage | undefined): void;
  /** A connector's own retry (an encode item on its next alternate): tells the observers, like an attempt retry. */
  retrying(attempt: number, error: Error): void;
  /** Pauses `ms` between tries; rejects when the request is aborted meanwhile. */
  pause(ms: number): Promise<void>;
  /**
   * A KV hand-off between a prefill and a decode did not complete (the decode leg failed or was aborted before
   * its first byte, or, SGLang, a leg of the pair failed). The runner works out why, releases what it can and
   * tells the observer; it never throws.
   */
  kvStranded(report: KvStrandReport): void;
  /** A sequential KV connector's prefill answered without `kv_transfer_params` (see `StageObserver.kvParamsMissing`). */
  kvParamsMissing(prefill: EndpointRef): void;
  /**
   * The body every leg of an attempt is built from, given the client's (or, vLLM EPD, the encoded) body: the same
   * object unless the stream may be resumed (per-chunk usage asked for) or is being resumed (the continuation).
   */
  legBody(body: Record<string, unknown>): Record<string, unknown>;
}

/** What a connector knows about a hand-off that did not complete. */
export interface KvStrandReport {
  readonly engine: 'vLLM' | 'SGLang';
  readonly prefill: EndpointRef;
  readonly decode: EndpointRef;
  /** The leg whose failure ended it; for an aborted request the runner names the abort instead. */
  readonly failed: 'prefill' | 'decode';
  /** vLLM: what a release leg needs: the prefill's `kv_transfer_params` (raw JSON) and the body the decode got. */
  readonly release?: { readonly kvParams: string; readonly body: Record<string, unknown> };
  /** SGLang: the other leg was still in flight and has been aborted (the engine then frees the room). */
  readonly peerAborted?: boolean;
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
  /** Headers of this leg alone (vLLM `X-data-parallel-rank` to a DP>1 EC consumer). */
  readonly headers?: Readonly<Record<string, string>>;
  /** Called once when the first body byte of a 2xx answer arrives (a vLLM decode then has the request and its KV). */
  readonly onFirstByte?: () => void;
  /** Where the leg goes when it is not an engine pod's plain HTTP address (an external provider's HTTPS origin). */
  readonly origin?: RemoteOrigin;
  /** Relay legs: how the answer reaches the client when it is not an engine's OpenAI answer (a provider's API). */
  readonly answer?: AnswerCodec;
}

/** An HTTP(S) origin outside the cluster (an ExternalModelProvider's `baseURL`). */
export interface RemoteOrigin {
  /** `scheme://host:port`. */
  readonly url: string;
  /** Verify the server certificate (the provider's `insecureSkipVerify` turns it off). */
  readonly verifyTls: boolean;
}

/**
 * Rewrites a relay leg's answer for the client. The engine default (no codec) relays OpenAI answers as they are,
 * reading usage and removing an injected usage chunk; a provider's codec reads its API's usage, translates
 * another API's answer, and decides what a non-2xx answer does.
 */
export interface AnswerCodec {
  /** A 2xx event stream. */
  stream(): StreamRelay;
  /** A complete 2xx answer: what the client gets; throws when the answer cannot be read (the leg then fails). */
  whole(body: Buffer, contentType: string): RelayedAnswer;
  /**
   * A non-2xx answer (its body cut at 64 KB): the error the leg fails with and, when the client gets the answer
   * instead of a retry, that answer (written before the leg fails).
   */
  failed(status: number, body: Buffer): { readonly error: Error; readonly answer?: RelayedAnswer };
}

/** A rewritten complete answer. */
export interface RelayedAnswer {
  readonly contentType: string;
  readonly body: Buffer;
  readonly usage?: Usage | undefined;
}

/** Rewrites one event stream chunk by chunk (chunks may split events). */
export interface StreamRelay {
  /** The content type the client gets; absent: the upstream's. */
  readonly contentType?: string;
  /** What the client gets of `chunk` (possibly nothing yet). */
  push(chunk: Buffer): Buffer;
  /** The rest at the end of the stream. */
  flush(): Buffer;
  /** Checked after `flush`: why the stream is not a complete answer (the leg fails once the rest is relayed). */
  incomplete?(): Error | undefined;
  /** Token counts the stream reported, once it has. */
  readonly usage: Usage | undefined;
}

/** A buffered 2xx answer. */
export interface BufferedAnswer {
  readonly status: number;
  readonly contentType: string;
  readonly body: Buffer;
}

export type { Attempt, Decision, EndpointRef, Stage };
