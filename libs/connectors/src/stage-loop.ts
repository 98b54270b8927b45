import { performance } from 'node:perf_hooks';
import type { Attempt, Decision, EndpointRef, Stage } from '@triad/bus';
import { ErrorCode, isTriadError } from '@triad/errors';
import {
  asError,
  GENERATE_PATH,
  generateSampleCount,
  isRetryable,
  writeErrorResponse,
  writeStreamError,
  type KvStrandReason,
  type KvStrandedEvent,
  type ProxyRequest,
  type RetryPolicy,
  TRACE_ID_HEADER,
  type Usage,
} from '@triad/request';
import { clientAbortedError, totalTimeoutError } from './errors';
import { ReleaseLegOwner, releaseTarget } from './kv-release';
import { Leg, LegMode, type LegOwner } from './leg';
import { vllmReleaseBody } from './request-bodies';
import { StreamResume } from './resume/stream-resume';
import type {
  BufferedAnswer,
  Connector,
  KvStrandReport,
  LegHandle,
  LegOutcome,
  LegRunner,
  LegSpec,
  StageObserver,
  StreamRelay,
} from './types';
import type { UpstreamPools } from './upstream-pools';
import { parseBodyUsage, SseUsageRelay } from './usage';

function ignore(): void {}

/**
 * The first attempt after `from` that names no endpoint in `failed` (its final leg's or its prefill's), else -1.
 * A decision whose attempts all name one endpoint (a provider target: its retries go to the same API) has no other
 * host to prefer, so its next attempt is simply the next one, as Envoy's previous-hosts predicate gives up and
 * reuses the host when no other is left.
 */
function nextUntried(attempts: readonly Attempt[], from: number, failed: ReadonlySet<string>): number {
  if (attempts.length > 1 && attempts.every((a) => a.endpoint.key === attempts[0]?.endpoint.key && a.prefill === undefined))
    return from + 1 < attempts.length ? from + 1 : -1;
  for (let j = from + 1; j < attempts.length; j++) {
    const a = attempts[j];
    if (!failed.has(a.endpoint.key) && (a.prefill === undefined || !failed.has(a.prefill.key))) return j;
  }
  return -1;
}

/** Gateway-wide choices of the stage loop. */
export interface StageLoopOptions {
  /**
   * Send a release leg for a vLLM KV hand-off a decode did not take (default true). Off, the prefill keeps the
   * blocks until its own timeout (`VLLM_NIXL_ABORT_REQUEST_TIMEOUT`, 480 s by default): the baseline.
   */
  readonly kvRelease?: boolean;
}

/** Names the stages a request skipped for want of a usable endpoint (`encode`, `prefill`, comma-separated). */
export const STAGE_FALLBACK_HEADER = 'x-triad-stage-fallback';

/** A stream the connector composes itself (merged samples) is an OpenAI or SGLang event stream. */
const SSE_CONTENT_TYPE = 'text/event-stream';

const STAGE_SLOT: Readonly<Record<Stage, number>> = { encode: 0, prefill: 1, decode: 2, aggregated: 2 };

function flushClient(loop: StageLoop): void {
  loop.flushClient();
}

function onTotalTimeout(loop: StageLoop): void {
  loop.abort(totalTimeoutError(loop.totalMs));
}

/**
 * Runs one request through a connector: the once-per-request stage (EPD encode), then the decision's attempts in
 * order, retrying only while no byte has reached the client and only on retryable failures (connect, 5xx, 429,
 * stage timeouts) as `trafficPolicy.retry` allows. It owns every leg, so a client disconnect or the total
 * timeout aborts all of them, and it writes the error answer itself: an OpenAI error before the first byte, an
 * SSE error event plus `[DONE]` after it.
 */
class StageLoop implements LegRunner, LegOwner {
  readonly suppressUsage: boolean;
  readonly totalMs: number;
  /** The engines answer SGLang's native `/generate`: token counts come from `meta_info`, there is no usage. */
  readonly #nativeGenerate: boolean;
  /**
   * How many times the counts read from an engine's answer hold each prompt: `n` for a native `/generate` asking for
   * `sampling_params.n > 1`, else 1. SGLang answers it with one output per (prompt, sample), and every output's
   * `meta_info.prompt_tokens` is its whole prompt, so their sum is n × the prompts' (an OpenAI answer counts the
   * prompt once in `usage`, whatever `n`). Counts a connector merged itself (SGLang PD fans `n` out into one request
   * per sample: `respond(answer, counted)`, `endStream(tail, usage)`) already hold each prompt once.
   */
  readonly #promptRepeats: number;
  readonly #ctx: ProxyRequest;
  readonly #pools: UpstreamPools;
  readonly #observer: StageObserver;
  readonly #kvRelease: boolean;
  readonly #active = new Set<Leg>();
  readonly #stageStart = [0, 0, 0];
  readonly #stageEnd = [0, 0, 0];
  #aborted: Error | undefined;
  #committed = false;
  /** Relayed chunks of the current socket read, written together (see writeClient). */
  #out: Buffer[] | undefined;
  #outLeg: Leg | undefined;
  /** A composed stream's write met backpressure: its tapped legs are paused until the client's side drains. */
  #tapsHeld = false;
  readonly #releaseTaps = (): void => this.#resumeTaps();
  #timer: NodeJS.Timeout | undefined;
  /** `trafficPolicy.streamResume` of a streamed request: what was sent, and whether a broken stream goes on. */
  readonly #resume: StreamResume | undefined;

  constructor(ctx: ProxyRequest, pools: UpstreamPools, observer: StageObserver, options: StageLoopOptions) {
    this.#ctx = ctx;
    this.#pools = pools;
    this.#observer = observer;
    this.#kvRelease = options.kvRelease !== false;
    this.suppressUsage = ctx.proxy.injectUsage && !ctx.proxy.clientWantsUsage;
    this.#nativeGenerate = (ctx.routing.upstreamPath ?? ctx.path) === GENERATE_PATH;
    this.#promptRepeats = this.#nativeGenerate ? generateSampleCount(ctx.body) : 1;
    this.totalMs = ctx.routing.server.timeouts.totalMs;
    this.#resume = StreamResume.of(ctx);
  }

  /** Runs the request to its end; never rejects (the outcome is in `ctx.result`). */
  async run(connector: Connector): Promise<void> {
    const ctx = this.#ctx;
    const result = ctx.result;
    const retry = ctx.routing.server.retry;
    if (this.totalMs > 0) {
      const left = Math.max(1, this.totalMs - (performance.now() - ctx.receivedAt));
      this.#timer = setTimeout(onTotalTimeout, left, this);
    }
    try {
      const decided = 'decision' in ctx.proxy ? (ctx.proxy.decision as Decision).disaggregation?.fallback : undefined;
      if (decided !== undefined) result.stageFallbacks.push(...decided);
      if (connector.prepare !== undefined) await connector.prepare(ctx, this);
      await this.#attempts(connector, retry);
      if (result.status === 0) result.status = 200;
      this.#resume?.ended(true);
    } catch (err) {
      this.#resume?.ended(false);
      // An abort (client gone, total timeout) explains the failure better than the leg error it caused.
      const error = this.#aborted ?? asError(err);
      result.error = error;
      if (this.#committed) {
        this.flushClient(); // relayed bytes still gathered for this read go out before the error event
        if (connector.writeStreamError !== undefined) connector.writeStreamError(ctx, error);
        else writeStreamError(ctx.sink, error);
        // A client that left mid-stream is recorded as such (nginx's 499), not as the 200 it had started with.
        if (isTriadError(error) && error.code === ErrorCode.ClientAborted) result.status = 499;
      } else {
        result.status = writeErrorResponse(ctx.sink, error, ctx.id, ctx, ctx.traceId);
      }
    } finally {
      if (this.#timer !== undefined) clearTimeout(this.#timer);
      // Legs still running (a sibling encode of a failed item) are not needed any more. An aborted leg settles at
      // once, so after this no leg of the request is in flight on any path out of run().
      if (this.#active.size > 0) this.#abortActive(result.error ?? clientAbortedError());
      this.#recordStageTimes();
      this.#reportResume();
    }
  }

  /**
   * The decision's attempts in order, as the retry policy allows, each retry on the next attempt that names no
   * endpoint which already failed this request (Envoy's previous-hosts predicate: the alternates of a P/D decision
   * share pods). When none is left and the failed stage has a shortcut, one more try runs without that stage.
   */
  async #attempts(connector: Connector, retry: RetryPolicy): Promise<void> {
    const ctx = this.#ctx;
    const result = ctx.result;
    const attempts = ctx.proxy.attempts;
    const maxTries = Math.min(attempts.length, 1 + retry.retries);
    const failed = new Set<string>();
    let attempt: Attempt = attempts[0];
    let index = 0;
    let fellBack = false;
    for (let t = 0; ; t++) {
      result.attempt = index;
      result.tries = t + 1;
      try {
        await connector.attempt(ctx, attempt, index, this);
        return;
      } catch (err) {
        if (this.#aborted !== undefined) throw err;
        if (this.#committed) {
          // Not a retry before the first byte (triad_gateway_retries_total): the stream goes on, on the next attempt
          // that names no endpoint which failed, or ends here.
          if (isRetryable(err) && err.stage !== 'encode') failed.add(err.endpoint);
          const next = nextUntried(attempts, index, failed);
          if (this.#resumeAfter(err, next >= 0) === 'done') return;
          index = next;
          attempt = attempts[next];
          continue;
        }
        if (!isRetryable(err)) throw err;
        if (err.stage !== 'encode') failed.add(err.endpoint);
        const next = t + 1 < maxTries ? nextUntried(attempts, index, failed) : -1;
        if (next >= 0) {
          index = next;
          attempt = attempts[next];
        } else {
          // No alternate left: the stage that failed may have a shortcut (never with retries off: the baseline).
          const shortcut = fellBack || retry.retries === 0 ? undefined : connector.fallback?.(ctx, err, failed);
          if (shortcut === undefined || (err.stage !== 'encode' && err.stage !== 'prefill')) throw err;
          fellBack = true;
          attempt = shortcut;
          result.stageFallbacks.push({ stage: err.stage, reason: 'all_failed' });
        }
        this.#observer.retry(ctx, t, err);
        await this.pause(retry.intervalMs);
      }
    }
  }

  /**
   * The final leg failed after bytes reached the client. Returns 'next' to run the next attempt (a continuation of
   * the stream, or a continuation that failed before writing anything tried again), 'done' when the gateway ended
   * the answer itself; throws `err` when the stream cannot go on.
   */
  #resumeAfter(err: unknown, nextAttempt: boolean): 'next' | 'done' {
    const resume = this.#resume;
    if (resume === undefined || !isRetryable(err)) throw err;
    this.flushClient(); // what the broken leg relayed goes out before the continuation's first bytes
    if (resume.continuationSilent) {
      if (!nextAttempt) throw err;
      return 'next';
    }
    const step = resume.broke(nextAttempt);
    if (step.kind === 'refuse') {
      this.#ctx.result.resumeRefused = step.reason;
      throw err;
    }
    if (step.kind === 'complete') {
      resume.completed();
      const usage = resume.usage;
      if (usage !== undefined) this.recordUsage(usage.promptTokens, usage.completionTokens);
      this.endClient(step.tail);
      return 'done';
    }
    this.#ctx.result.resumes = resume.resumes;
    return 'next';
  }

  #reportResume(): void {
    const outcome = this.#resume?.outcome;
    if (outcome !== undefined) this.#observer.streamResumed?.(this.#ctx, outcome);
  }

  /** The relay of a streamed final leg: a resumable stream's reads every event, others only the usage. */
  streamRelay(): StreamRelay {
    const resume = this.#resume;
    return resume !== undefined && resume.eligible ? resume.relay() : new SseUsageRelay(this.suppressUsage, this.#nativeGenerate);
  }

  legBody(body: Record<string, unknown>): Record<string, unknown> {
    const resume = this.#resume;
    return resume !== undefined && resume.eligible ? resume.legBody(body) : body;
  }

  /** Aborts every leg in flight and fails the request with `reason`. */
  abort(reason: Error): void {
    this.#aborted ??= reason;
    this.#abortActive(reason);
  }

  #abortActive(reason: Error): void {
    for (const leg of this.#active) leg.abort(reason);
  }

  buffered(spec: LegSpec): LegHandle<BufferedAnswer> {
    return this.#send(spec, LegMode.Buffer) as LegHandle<BufferedAnswer>;
  }

  relay(spec: LegSpec): LegHandle<void> {
    return this.#send(spec, LegMode.Relay) as LegHandle<void>;
  }

  drained(spec: LegSpec): LegHandle<void> {
    return this.#send(spec, LegMode.Drain) as LegHandle<void>;
  }

  tapped(spec: LegSpec, onData: (chunk: Buffer) => void): LegHandle<void> {
    return this.#send(spec, LegMode.Tap, onData) as LegHandle<void>;
  }

  writeStream(part: Buffer): void {
    if (!this.#committed && !this.commit(200, SSE_CONTENT_TYPE, -1)) return;
    const sink = this.#ctx.sink;
    if (sink.destroyed || sink.writableEnded) return;
    if (!sink.write(part)) this.#holdTaps();
  }

  /**
   * The client reads the composed stream slower than the taps feed it (its write buffer is over the high-water
   * mark): every tapped leg stops reading its engine, as a relayed leg does (flushClient), so what the gateway holds
   * stays bounded (the high-water mark, plus at most a socket read per leg) instead of growing with the answer. The
   * engines then see their own sockets fill and stop producing. Each write that still meets the
   * backpressure pauses again: a leg resumed meanwhile, or one whose answer just began, is held as well.
   */
  #holdTaps(): void {
    for (const leg of this.#active) if (leg.tapFlowing) leg.pause();
    if (this.#tapsHeld) return;
    this.#tapsHeld = true;
    this.#ctx.sink.once('drain', this.#releaseTaps);
  }

  #resumeTaps(): void {
    this.#tapsHeld = false;
    for (const leg of this.#active) {
      // A resumed leg's held bytes can fill the client's buffer again at once: the others stay paused then.
      if (this.#tapsHeld) return;
      if (leg.tapFlowing) leg.resume();
    }
  }

  endStream(tail: Buffer, usage: Usage | undefined): void {
    if (usage !== undefined) this.#setUsage(usage.promptTokens, usage.completionTokens);
    if (this.#committed || this.commit(200, SSE_CONTENT_TYPE, -1)) this.endClient(tail);
  }

  respond(answer: BufferedAnswer, counted?: Usage): void {
    if (counted !== undefined) this.#setUsage(counted.promptTokens, counted.completionTokens);
    else {
      const usage = parseBodyUsage(answer.body);
      if (usage !== undefined) this.recordUsage(usage.promptTokens, usage.completionTokens);
    }
    if (this.commit(answer.status, answer.contentType, answer.body.length)) this.endClient(answer.body);
  }

  retrying(attempt: number, error: Error): void {
    this.#observer.retry(this.#ctx, attempt, error);
  }

  pause(ms: number): Promise<void> {
    if (ms <= 0) return this.#aborted === undefined ? Promise.resolve() : Promise.reject(this.#aborted);
    return new Promise<void>((resolve, reject) => {
      setTimeout(() => (this.#aborted === undefined ? resolve() : reject(this.#aborted)), ms);
    });
  }

  kvStranded(report: KvStrandReport): void {
    const ctx = this.#ctx;
    const release = this.#kvRelease ? report.release : undefined;
    const target = release === undefined ? undefined : releaseTarget(ctx.proxy.attempts, report);
    const event: KvStrandedEvent = {
      engine: report.engine,
      prefill: report.prefill.pod,
      decode: report.decode.pod,
      reason: this.#strandReason(report.failed),
      action: target !== undefined ? 'release' : report.peerAborted === true ? 'abort_peer' : 'none',
      ...(target !== undefined ? { via: target.pod } : {}),
    };
    ctx.result.kvStranded.push(event);
    this.#observer.kvStranded?.(ctx, event);
    if (release === undefined || target === undefined) return;
    const owner = new ReleaseLegOwner((outcome) => this.#observer.kvReleased?.(ctx, event, outcome.ok, outcome.error));
    const body = vllmReleaseBody(release.body, release.kvParams);
    // Its own x-request-id: the retry's decode of the same request may run on the same engine at the same time, and
    // engines refuse (or mix up) two live requests with one id. The prefill's blocks are named by the params'
    // `remote_request_id`.
    const requestId = `${ctx.id}-kv-release`;
    const spec: LegSpec = {
      stage: 'decode',
      endpoint: target,
      item: -1,
      attempt: -1,
      body,
      requestId,
      timeoutMs: ctx.routing.server.timeouts.firstByteMs,
    };
    const leg = new Leg(owner, spec, LegMode.Drain, performance.now());
    leg.promise.catch(ignore);
    const headers = { ...ctx.upstreamHeaders, 'content-type': 'application/json', 'x-request-id': requestId };
    leg.request = { path: ctx.path, method: 'POST', headers, body };
    this.#pools.send(target.ip, target.port, ctx.routing.server.maxConnections, leg);
  }

  kvParamsMissing(prefill: EndpointRef): void {
    this.#observer.kvParamsMissing?.(this.#ctx, prefill);
  }

  /** The request's abort explains a stranded hand-off better than the leg failure it caused. */
  #strandReason(failed: 'prefill' | 'decode'): KvStrandReason {
    const aborted = this.#aborted;
    if (aborted !== undefined && isTriadError(aborted)) {
      if (aborted.code === ErrorCode.ClientAborted) return 'client_aborted';
      return 'total_timeout';
    }
    return failed === 'prefill' ? 'prefill_failed' : 'decode_failed';
  }

  #send(spec: LegSpec, mode: LegMode, tap?: (chunk: Buffer) => void): Leg {
    const ctx = this.#ctx;
    const leg = new Leg(this, spec, mode, performance.now(), tap);
    // The connector awaits the legs it needs; one it stopped caring about (an aborted sibling) must not surface
    // as an unhandled rejection, which would take the process down.
    leg.promise.catch(ignore);
    this.#active.add(leg);
    const slot = STAGE_SLOT[spec.stage];
    if (this.#stageStart[slot] === 0) this.#stageStart[slot] = leg.startedAt;
    if (this.#aborted !== undefined) {
      leg.abort(this.#aborted);
      return leg;
    }
    const pods = ctx.result.endpoints[spec.stage];
    if (pods === undefined) ctx.result.endpoints[spec.stage] = [spec.endpoint.pod];
    else pods.push(spec.endpoint.pod);
    const span = this.#observer.legStart(ctx, leg);
    const headers: Record<string, string> = { ...ctx.upstreamHeaders, 'content-type': 'application/json', 'x-request-id': spec.requestId };
    if (spec.headers !== undefined) Object.assign(headers, spec.headers);
    if (span !== undefined) {
      leg.span = span;
      if (span.headers !== undefined) Object.assign(headers, span.headers);
    }
    leg.request = { path: spec.path ?? ctx.path, method: 'POST', headers, body: spec.body };
    // Sent now, or queued behind the endpoint's connection limit (the leg's stage budget bounds the wait).
    const limit = ctx.routing.server.maxConnections;
    if (spec.origin !== undefined) this.#pools.sendTo(spec.origin, limit, leg);
    else this.#pools.send(spec.endpoint.ip, spec.endpoint.port, limit, leg);
    return leg;
  }

  legSettled(leg: Leg, outcome: LegOutcome): void {
    this.#active.delete(leg);
    const slot = STAGE_SLOT[leg.stage];
    this.#stageEnd[slot] = performance.now();
    this.#observer.legEnd(this.#ctx, leg, outcome);
    if (leg.span !== undefined) {
      const span = leg.span;
      leg.span = undefined;
      span.end(outcome.ok, outcome.status, outcome.error);
    }
  }

  legWaiting(leg: Leg, waiting: boolean): void {
    this.#observer.legWaiting?.(this.#ctx, leg, waiting);
  }

  commit(status: number, contentType: string, contentLength: number): boolean {
    const ctx = this.#ctx;
    const sink = ctx.sink;
    // A continuation's first bytes follow the broken leg's in the same answer.
    if (this.#committed && (this.#resume?.resumes ?? 0) > 0) return !sink.destroyed && !sink.writableEnded;
    if (sink.destroyed || sink.headersSent) return false;
    this.#committed = true;
    ctx.result.status = status;
    ctx.result.firstByteAt = performance.now();
    // The trace id first: the head is written in one call (no setHeader before it, node's slower merging path).
    const traceId = ctx.traceId;
    const headers: Record<string, string | number> =
      traceId === undefined
        ? contentLength >= 0
          ? { 'content-type': contentType, 'content-length': contentLength, 'x-request-id': ctx.id }
          : { 'content-type': contentType, 'cache-control': 'no-cache', 'x-request-id': ctx.id }
        : contentLength >= 0
          ? { [TRACE_ID_HEADER]: traceId, 'content-type': contentType, 'content-length': contentLength, 'x-request-id': ctx.id }
          : { [TRACE_ID_HEADER]: traceId, 'content-type': contentType, 'cache-control': 'no-cache', 'x-request-id': ctx.id };
    const fallbacks = ctx.result.stageFallbacks;
    if (fallbacks.length > 0) headers[STAGE_FALLBACK_HEADER] = [...new Set(fallbacks.map((f) => f.stage))].join(',');
    sink.writeHead(status, headers);
    this.#observer.firstByte(ctx);
    return true;
  }

  writeClient(chunk: Buffer, leg: Leg): void {
    const sink = this.#ctx.sink;
    if (sink.destroyed || sink.writableEnded) return;
    // The transport hands over one HTTP chunk (one SSE event) at a time, many per socket read. Gathering them until the
    // parser is done with the read (nextTick) and writing once saves node's per-write work and a syscall each.
    if (this.#out === undefined) {
      this.#out = [chunk];
      this.#outLeg = leg;
      process.nextTick(flushClient, this);
    } else {
      this.#out.push(chunk);
    }
  }

  flushClient(): void {
    const out = this.#out;
    const leg = this.#outLeg as Leg;
    this.#out = undefined;
    this.#outLeg = undefined;
    const sink = this.#ctx.sink;
    if (out === undefined || sink.destroyed || sink.writableEnded) return;
    if (!sink.write(out.length === 1 ? out[0] : Buffer.concat(out))) {
      leg.pause();
      sink.once('drain', () => leg.resume());
    }
  }

  endClient(chunk: Buffer | undefined): void {
    const sink = this.#ctx.sink;
    let last = chunk;
    if (this.#out !== undefined) {
      if (chunk !== undefined) this.#out.push(chunk);
      last = Buffer.concat(this.#out);
      this.#out = undefined;
      this.#outLeg = undefined;
    }
    if (!sink.destroyed && !sink.writableEnded) sink.end(last);
  }

  /** Counts read from an engine's answer: each prompt counted once (see #promptRepeats). */
  recordUsage(promptTokens: number, completionTokens: number): void {
    // A whole answer holds every prompt exactly n times; a stream cut short may hold some samples' prompts only.
    this.#setUsage(this.#promptRepeats === 1 ? promptTokens : Math.round(promptTokens / this.#promptRepeats), completionTokens);
  }

  #setUsage(promptTokens: number, completionTokens: number): void {
    this.#ctx.result.usage = { promptTokens, completionTokens };
  }

  #recordStageTimes(): void {
    const result = this.#ctx.result;
    const [es, ps, ds] = this.#stageStart as [number, number, number];
    const [ee, pe, de] = this.#stageEnd as [number, number, number];
    if (es > 0 && ee > 0) result.encodeMs = ee - es;
    if (ps > 0 && pe > 0) result.prefillMs = pe - ps;
    if (ds > 0 && de > 0) result.decodeMs = de - ds;
  }
}

/**
 * Runs `ctx` through `connector`, reporting legs to `observer`; attaches the loop to the context so the
 * client's departure (`ctx.clientGone`) aborts every leg.
 */
export function runProxy(
  ctx: ProxyRequest,
  connector: Connector,
  pools: UpstreamPools,
  observer: StageObserver,
  options: StageLoopOptions = {},
): Promise<void> {
  const loop = new StageLoop(ctx, pools, observer, options);
  ctx.attach(loop);
  return loop.run(connector);
}
