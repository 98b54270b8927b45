import { performance } from 'node:perf_hooks';
import type { Stage } from '@triad/bus';
import { ErrorCode } from '@triad/errors';
import { clientAbortedError, isRetryable, totalTimeoutError } from './errors';
import { Leg, LegMode, type LegOwner } from './leg';
import { writeErrorResponse, writeStreamError } from './openai-errors';
import type { BufferedAnswer, Connector, LegHandle, LegOutcome, LegRunner, LegSpec, ProxyCall } from './types';
import type { UpstreamPools } from './upstream-pools';
import { parseBodyUsage } from './usage';

const STAGE_SLOT: Readonly<Record<Stage, number>> = { encode: 0, prefill: 1, decode: 2, aggregated: 2 };

function flushClient(loop: StageLoop): void {
  loop.flushClient();
}

function onTotalTimeout(loop: StageLoop): void {
  loop.abort(totalTimeoutError(loop.totalMs));
}

/** An empty result for a new call. */
export function emptyResult(): ProxyCall['result'] {
  return { status: 0, error: undefined, attempt: 0, tries: 0, usage: undefined, firstByteAt: 0, encodeMs: 0, prefillMs: 0, decodeMs: 0 };
}

/**
 * Runs one call through a connector: the once-per-request stage (EPD encode), then the decision's attempts in
 * order, retrying only while no byte has reached the client and only on retryable failures (connect, 5xx, 429,
 * stage timeouts) as `trafficPolicy.retry` allows. It owns every leg, so a client disconnect or the total
 * timeout aborts all of them, and it writes the error answer itself: an OpenAI error before the first byte, an
 * SSE error event plus `[DONE]` after it.
 */
export class StageLoop implements LegRunner, LegOwner {
  readonly suppressUsage: boolean;
  readonly totalMs: number;
  readonly #call: ProxyCall;
  readonly #pools: UpstreamPools;
  readonly #active = new Set<Leg>();
  readonly #stageStart = [0, 0, 0];
  readonly #stageEnd = [0, 0, 0];
  #aborted: Error | undefined;
  #committed = false;
  /** Relayed chunks of the current socket read, written together (see writeClient). */
  #out: Buffer[] | undefined;
  #outLeg: Leg | undefined;
  #timer: NodeJS.Timeout | undefined;

  constructor(call: ProxyCall, pools: UpstreamPools) {
    this.#call = call;
    this.#pools = pools;
    this.suppressUsage = call.injectUsage && !call.clientWantsUsage;
    this.totalMs = call.server.timeouts.totalMs;
  }

  /** Runs the call to its end; never rejects (the outcome is in `call.result`). */
  async run(connector: Connector): Promise<void> {
    const call = this.#call;
    const result = call.result;
    if (this.totalMs > 0) {
      const left = Math.max(1, this.totalMs - (performance.now() - call.receivedAt));
      this.#timer = setTimeout(onTotalTimeout, left, this);
    }
    try {
      if (connector.prepare !== undefined) await connector.prepare(call, this);
      const attempts = call.decision.attempts;
      const tries = Math.min(attempts.length, 1 + call.server.retry.retries);
      for (let i = 0; ; i++) {
        result.attempt = i;
        result.tries = i + 1;
        try {
          await connector.attempt(call, attempts[i] as (typeof attempts)[number], i, this);
          break;
        } catch (err) {
          if (this.#aborted !== undefined || this.#committed || i + 1 >= tries || !isRetryable(err)) throw err;
          call.observer.retry(call, i, err as Error);
          await this.pause(call.server.retry.intervalMs);
        }
      }
      if (result.status === 0) result.status = 200;
    } catch (err) {
      // An abort (client gone, total timeout) explains the failure better than the leg error it caused.
      const error = this.#aborted ?? (err as Error);
      result.error = error;
      if (this.#committed) {
        this.flushClient(); // relayed bytes still gathered for this read go out before the error event
        writeStreamError(call.sink, error);
        // A client that left mid-stream is recorded as such (nginx's 499), not as the 200 it had started with.
        if ((error as { code?: string }).code === ErrorCode.ClientAborted) result.status = 499;
      } else {
        result.status = writeErrorResponse(call.sink, error, call.id);
      }
    } finally {
      if (this.#timer !== undefined) clearTimeout(this.#timer);
      // Legs still running (a sibling encode of a failed item) are not needed any more.
      if (this.#active.size > 0) this.#abortActive(result.error ?? clientAbortedError());
      this.#recordStageTimes();
    }
  }

  /** Aborts every leg in flight and fails the call with `reason`. */
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

  respond(answer: BufferedAnswer): void {
    const usage = parseBodyUsage(answer.body);
    if (usage !== undefined) this.recordUsage(usage.promptTokens, usage.completionTokens);
    if (this.commit(answer.status, answer.contentType, answer.body.length)) this.endClient(answer.body);
  }

  pause(ms: number): Promise<void> {
    if (ms <= 0) return this.#aborted === undefined ? Promise.resolve() : Promise.reject(this.#aborted);
    return new Promise<void>((resolve, reject) => {
      setTimeout(() => (this.#aborted === undefined ? resolve() : reject(this.#aborted)), ms);
    });
  }

  #send(spec: LegSpec, mode: LegMode): Leg {
    const call = this.#call;
    const leg = new Leg(this, spec, mode, performance.now());
    this.#active.add(leg);
    const slot = STAGE_SLOT[spec.stage];
    if (this.#stageStart[slot] === 0) this.#stageStart[slot] = leg.startedAt;
    if (this.#aborted !== undefined) {
      leg.abort(this.#aborted);
      return leg;
    }
    const extra = call.observer.legStart(call, leg);
    const headers: Record<string, string> = { ...call.upstreamHeaders, 'content-type': 'application/json', 'x-request-id': spec.requestId };
    if (extra !== undefined) Object.assign(headers, extra);
    try {
      this.#pools.get(spec.endpoint.ip, spec.endpoint.port).dispatch({ path: spec.path ?? call.path, method: 'POST', headers, body: spec.body }, leg);
    } catch (err) {
      leg.onResponseError(undefined as never, err as Error);
    }
    return leg;
  }

  legSettled(leg: Leg, outcome: LegOutcome): void {
    this.#active.delete(leg);
    const slot = STAGE_SLOT[leg.stage];
    this.#stageEnd[slot] = performance.now();
    this.#call.observer.legEnd(this.#call, leg, outcome);
  }

  commit(status: number, contentType: string, contentLength: number): boolean {
    const call = this.#call;
    const sink = call.sink;
    if (sink.destroyed || sink.headersSent) return false;
    this.#committed = true;
    call.result.status = status;
    call.result.firstByteAt = performance.now();
    if (contentLength >= 0) {
      sink.writeHead(status, { 'content-type': contentType, 'content-length': contentLength, 'x-request-id': call.id });
    } else {
      sink.writeHead(status, { 'content-type': contentType, 'cache-control': 'no-cache', 'x-request-id': call.id });
    }
    call.observer.firstByte(call);
    return true;
  }

  writeClient(chunk: Buffer, leg: Leg): void {
    const sink = this.#call.sink;
    if (sink.destroyed || sink.writableEnded) return;
    // undici hands over one HTTP chunk (one SSE event) at a time, many per socket read. Gathering them until the
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
    const sink = this.#call.sink;
    if (out === undefined || sink.destroyed || sink.writableEnded) return;
    if (!sink.write(out.length === 1 ? (out[0] as Buffer) : Buffer.concat(out))) {
      leg.pause();
      sink.once('drain', () => leg.resume());
    }
  }

  endClient(chunk: Buffer | undefined): void {
    const sink = this.#call.sink;
    let last = chunk;
    if (this.#out !== undefined) {
      if (chunk !== undefined) this.#out.push(chunk);
      last = Buffer.concat(this.#out);
      this.#out = undefined;
      this.#outLeg = undefined;
    }
    if (!sink.destroyed && !sink.writableEnded) sink.end(last);
  }

  recordUsage(promptTokens: number, completionTokens: number): void {
    this.#call.result.usage = { promptTokens, completionTokens };
  }

  #recordStageTimes(): void {
    const result = this.#call.result;
    const [es, ps, ds] = this.#stageStart as [number, number, number];
    const [ee, pe, de] = this.#stageEnd as [number, number, number];
    if (es > 0 && ee > 0) result.encodeMs = ee - es;
    if (ps > 0 && pe > 0) result.prefillMs = pe - ps;
    if (ds > 0 && de > 0) result.decodeMs = de - ds;
  }
}

/** Runs `call` through `connector`; wires `call.abort` so the caller can abort every leg (client disconnect). */
export function runProxy(call: ProxyCall, connector: Connector, pools: UpstreamPools): Promise<void> {
  const loop = new StageLoop(call, pools);
  call.abort = (reason) => loop.abort(reason);
  return loop.run(connector);
}
