import type { Dispatcher } from 'undici';
import type { EndpointRef, Stage } from '@triad/bus';
import { asError, type LegFailure, type StageSpan } from '@triad/request';
import {
  clientAbortedError,
  connectionWaitTimeoutError,
  engineErrorMessage,
  leadingErrorEventError,
  stageTimeoutError,
  upstreamHttpError,
  upstreamTransportError,
} from './errors';
import type { AnswerCodec, BufferedAnswer, LegHandle, LegInfo, LegOutcome, LegSpec, StreamRelay } from './types';
import type { EndpointSlot, UpstreamRequest } from './upstream-pools';
import { legWriteDone, legWritePending } from './leg-writes';
import { leadingFailure } from './leading-event';
import { IDLE_CLOSE_RACE_MS, expectSocket, isClosedSocketError, socketFreed, type SocketUse, type SocketUseListener } from './socket-reuse';
import { parseBodyUsage } from './usage';
import { withoutLeadingComments } from './sse';

/** How a leg treats a 2xx answer. */
export const LegMode = {
  /** Keep the whole body and hand it to the connector (encode, prefill, SGLang non-stream decode). */
  Buffer: 0,
  /** Write it to the client: SSE chunk by chunk, JSON once complete. */
  Relay: 1,
  /** Read and drop it (SGLang prefill). */
  Drain: 2,
  /** Hand it over as it arrives, never to the client (one sample of a fanned-out `n > 1` request). */
  Tap: 3,
} as const;
export type LegMode = (typeof LegMode)[keyof typeof LegMode];

/** What a leg needs from the stage loop that owns it. */
export interface LegOwner {
  /** The client wants the injected usage chunk removed from the stream. */
  readonly suppressUsage: boolean;
  legSettled(leg: Leg, outcome: LegOutcome): void;
  /** The leg started (`true`) or stopped (`false`) waiting for a free connection to its endpoint. */
  legWaiting(leg: Leg, waiting: boolean): void;
  /** Writes the response head (first byte to the client); returns false when the client is gone. */
  commit(status: number, contentType: string, contentLength: number): boolean;
  writeClient(chunk: Buffer, leg: Leg): void;
  endClient(chunk: Buffer | undefined): void;
  recordUsage(promptTokens: number, completionTokens: number): void;
  /** The relay of a streamed engine answer (a resumable stream's reads every event). */
  streamRelay(): StreamRelay;
}

const MAX_ERROR_BODY = 64 * 1024;
const EMPTY = Buffer.alloc(0);

const CONTENT_TYPE = 'content-type';

/** The content-type of raw response headers (name, value, …; names in any case), without building a headers object. */
function contentTypeOf(rawHeaders: readonly (Buffer | string)[]): string | undefined {
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const name = rawHeaders[i];
    if (name.length !== CONTENT_TYPE.length || name.toString('latin1').toLowerCase() !== CONTENT_TYPE) continue;
    const value = rawHeaders[i + 1];
    return typeof value === 'string' ? value : value.toString('latin1');
  }
  return undefined;
}

function onTimeout(leg: Leg): void {
  leg.timedOut();
}

/**
 * One HTTP request to an engine, driven by undici's legacy dispatch handler API (no stream objects on the hot path),
 * which the gateway's own HTTP/1.1 client (h1/, plain `http:` engines) calls the same way.
 * It settles exactly once: with the answer, or with an UpstreamError naming the stage, endpoint and status.
 */
export class Leg implements UpstreamRequest, SocketUseListener, LegInfo, LegHandle<BufferedAnswer | undefined> {
  readonly stage: Stage;
  readonly endpoint: EndpointRef;
  readonly item: number;
  readonly attempt: number;
  readonly startedAt: number;
  readonly promise: Promise<BufferedAnswer | undefined>;
  /** The observer's span for this leg (set when it is sent), ended by the owner when the leg settles. */
  span: StageSpan | undefined = undefined;
  /** What is sent (set by the stage loop before the leg is handed to the pools). */
  request!: Dispatcher.DispatchOptions;
  readonly #owner: LegOwner;
  readonly #mode: LegMode;
  readonly #timeoutMs: number;
  #onFirstByte: (() => void) | undefined;
  readonly #codec: AnswerCodec | undefined;
  readonly #tap: ((chunk: Buffer) => void) | undefined;
  #resolve!: (answer: BufferedAnswer | undefined) => void;
  #reject!: (err: Error) => void;
  /** The transport's abort of the request on the wire (from `onConnect`), until it fails or is sent again. */
  #abortRequest: ((err?: Error) => void) | undefined;
  /** The transport's resume of a paused response (from `onHeaders`). */
  #resumeResponse: (() => void) | undefined;
  #paused = false;
  #pendingAbort: Error | undefined;
  #settled = false;
  #status = 0;
  #failed = false;
  #chunks: Buffer[] = [];
  #size = 0;
  #sse: StreamRelay | undefined;
  #contentType = '';
  #sawData = false;
  #headWritten = false;
  #timer: NodeJS.Timeout | undefined;
  /** The endpoint's connection slot: held while running, or the queue the leg waits in. */
  #slot: EndpointSlot | undefined;
  #waiting = false;
  /** The socket the request went out on (socket-reuse.ts). */
  #socketUse: SocketUse | undefined;
  /** Sent again once on a fresh connection already: never twice. */
  #resent = false;
  /** Handed to the transport and not written yet (leg-writes.ts). */
  #writePending = false;

  constructor(owner: LegOwner, spec: LegSpec, mode: LegMode, now: number, tap?: (chunk: Buffer) => void) {
    this.stage = spec.stage;
    this.endpoint = spec.endpoint;
    this.item = spec.item;
    this.attempt = spec.attempt;
    this.startedAt = now;
    this.#owner = owner;
    this.#mode = mode;
    this.#timeoutMs = spec.timeoutMs;
    this.#onFirstByte = spec.onFirstByte;
    this.#codec = spec.answer;
    this.#tap = tap;
    this.promise = new Promise<BufferedAnswer | undefined>((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
    if (spec.timeoutMs > 0) this.#timer = setTimeout(onTimeout, spec.timeoutMs, this);
  }

  /** Aborts the leg (client gone, a sibling failed, total timeout); settles it with `reason`. */
  abort(reason: Error): void {
    if (this.#settled) return;
    this.#fail(reason);
    if (this.#abortRequest !== undefined) this.#abortRequest(reason);
    else this.#pendingAbort = reason;
  }

  timedOut(): void {
    this.#timer = undefined;
    const slot = this.#slot;
    if (this.#waiting && slot !== undefined) {
      this.abort(connectionWaitTimeoutError(this.#failure(), this.#timeoutMs, slot.limit, slot.waiting));
      return;
    }
    const budget = this.#mode === LegMode.Relay || this.#mode === LegMode.Tap ? 'first-byte' : this.stage;
    this.abort(stageTimeoutError(this.#failure(), budget, this.#timeoutMs));
  }

  queued(slot: EndpointSlot): void {
    this.#slot = slot;
    this.#waiting = true;
    this.#owner.legWaiting(this, true);
  }

  connected(slot: EndpointSlot, waited: boolean): void {
    this.#slot = slot;
    if (!this.#writePending) {
      this.#writePending = true;
      legWritePending();
    }
    if (waited) {
      this.#waiting = false;
      this.#owner.legWaiting(this, false);
    }
  }

  /** Gives the connection back (or leaves the queue) once the leg is settled. */
  #releaseSlot(): void {
    const slot = this.#slot;
    if (slot === undefined) return;
    this.#slot = undefined;
    if (this.#waiting) {
      this.#waiting = false;
      slot.withdraw(this);
      this.#owner.legWaiting(this, false);
    } else {
      slot.release();
    }
  }

  /*
   * The handler methods are undici's legacy ones (`onConnect`, `onHeaders`, `onData`, `onComplete`, `onError`),
   * which its Request calls directly (a handler with the newer `onRequestStart`… methods is wrapped per request in
   * an adapter and a controller object, and the adapter turns the raw response headers and trailers into objects of
   * which a leg reads one header) and which the gateway's own client (h1/pool.ts) calls as they are.
   */

  onConnect(abort: (err?: Error) => void): void {
    this.#writeDone();
    this.#abortRequest = abort;
    this.#paused = false;
    if (this.#pendingAbort !== undefined) {
      abort(this.#pendingAbort);
      return;
    }
    this.#socketUse = undefined;
    // The slot is set before the transport starts the request (the pools call `connected` first). The gateway's
    // own client calls `socketAssigned` itself; undici's socket comes through its diagnostics channel.
    const slot = this.#slot;
    if (slot !== undefined && !slot.reportsSockets) expectSocket(this, slot.origin);
  }

  socketAssigned(use: SocketUse): void {
    if (!this.#settled) this.#socketUse = use;
  }

  onHeaders(statusCode: number, rawHeaders: (Buffer | string)[], resume: () => void): boolean {
    this.#resumeResponse = resume;
    this.#status = statusCode;
    if (statusCode < 200 || statusCode >= 300) {
      this.#failed = true;
      return true;
    }
    this.#contentType = contentTypeOf(rawHeaders) ?? 'application/json';
    if (this.#mode === LegMode.Relay && this.#contentType.startsWith('text/event-stream')) {
      const codec = this.#codec;
      this.#sse = codec === undefined ? this.#owner.streamRelay() : codec.stream();
      if (this.#sse.contentType !== undefined) this.#contentType = this.#sse.contentType;
    }
    return !this.#paused;
  }

  onData(chunk: Buffer): boolean {
    this.#receive(chunk);
    return !this.#paused;
  }

  #receive(chunk: Buffer): void {
    if (this.#settled) return;
    const readsFirstEvent = this.#readsFirstEvent;
    if (!this.#sawData && !readsFirstEvent) {
      this.#firstData();
      if (!this.#failed) this.#tellFirstByte();
    }
    if (this.#sse !== undefined && !this.#failed) {
      let out = this.#sse.push(chunk);
      if (out.length === 0) return;
      if (!this.#headWritten && readsFirstEvent) {
        out = withoutLeadingComments(out);
        if (out.length === 0) return;
        if (!this.#sawData) this.#firstData();
        const failure = this.#firstEventFailure(out);
        if (failure !== undefined) {
          this.abort(failure);
          return;
        }
      }
      if (!this.#writeHead(-1)) return;
      this.#owner.writeClient(out, this);
      return;
    }
    if (this.#mode === LegMode.Drain && !this.#failed) return;
    if (this.#tap !== undefined && !this.#failed) {
      this.#tap(chunk);
      return;
    }
    if (this.#failed && this.#size >= MAX_ERROR_BODY) return;
    this.#chunks.push(chunk);
    this.#size += chunk.length;
  }

  /**
   * A tapped leg whose answer has begun: the owner pauses such legs while the client is slow. One still waiting for
   * its first byte holds nothing yet and is left running, so its first-byte budget measures the engine, not the
   * client; it is paused at its first chunk, whose write then meets the same backpressure.
   */
  get tapFlowing(): boolean {
    return this.#mode === LegMode.Tap && this.#sawData;
  }

  /** Pauses the engine socket while the client is slow; the owner resumes it on 'drain'. */
  pause(): void {
    this.#paused = true;
  }

  resume(): void {
    if (!this.#paused) return;
    this.#paused = false;
    this.#resumeResponse?.();
  }

  onComplete(): void {
    if (this.#settled) return;
    if (this.#failed) {
      const body = Buffer.concat(this.#chunks);
      if (this.#codec !== undefined) this.#failedAnswer(this.#codec, body);
      else this.#fail(upstreamHttpError(this.#failure(), engineErrorMessage(body)));
      return;
    }
    if (this.#sse !== undefined) {
      let rest = this.#sse.flush();
      if (!this.#headWritten && this.#readsFirstEvent) {
        // The first event ended without its blank line, or never came (a stream of comments only is no answer).
        rest = withoutLeadingComments(rest);
        if (rest.length === 0) {
          this.#fail(upstreamTransportError(this.#failure(), new Error('the stream ended before its first event')));
          return;
        }
        const failure = this.#firstEventFailure(rest);
        if (failure !== undefined) {
          this.#fail(failure); // the answer is complete: nothing to abort
          return;
        }
      }
      const incomplete = this.#sse.incomplete?.();
      if (!this.#writeHead(-1)) return;
      const usage = this.#sse.usage;
      if (usage !== undefined) this.#owner.recordUsage(usage.promptTokens, usage.completionTokens);
      if (incomplete !== undefined) {
        if (rest.length > 0) this.#owner.writeClient(rest, this);
        this.#fail(upstreamTransportError(this.#failure(), incomplete));
        return;
      }
      this.#owner.endClient(rest.length > 0 ? rest : undefined);
      this.#succeed(undefined);
      return;
    }
    const body = this.#chunks.length === 1 ? this.#chunks[0] : this.#chunks.length === 0 ? EMPTY : Buffer.concat(this.#chunks, this.#size);
    this.#chunks = [];
    if (this.#mode === LegMode.Relay) {
      if (this.#codec !== undefined) {
        this.#relayWhole(this.#codec, body);
        return;
      }
      const usage = parseBodyUsage(body);
      if (usage !== undefined) this.#owner.recordUsage(usage.promptTokens, usage.completionTokens);
      if (!this.#writeHead(body.length)) return;
      this.#owner.endClient(body);
      this.#succeed(undefined);
      return;
    }
    this.#succeed(this.#mode === LegMode.Buffer ? { status: this.#status, contentType: this.#contentType, body } : undefined);
  }

  onError(error: Error): void {
    if (this.#settled) return;
    if (this.#closedUnderUs(error)) {
      this.#resent = true;
      this.#socketUse = undefined;
      // Until the new connection starts the request, an abort is kept for it (onConnect applies it).
      this.#abortRequest = undefined;
      (this.#slot as EndpointSlot).resendFresh(this);
      return;
    }
    this.#fail(upstreamTransportError(this.#failure(), error));
  }

  /**
   * The keep-alive race: the engine closed an idle kept-alive socket just as this request was written on it, so the
   * engine never read it. Only then is it sent again, once, on a new connection: the socket had carried an earlier
   * request and then sat idle long enough to meet an engine's idle timeout (IDLE_CLOSE_RACE_MS), it failed with a
   * reset, a broken pipe or a close, and not one byte came back for this request (after any byte the engine may
   * have started on it, the failure is the leg's). A socket reused at once that fails so was closed by an engine
   * that read the request: that failure is the leg's too (the stage loop may try an alternate).
   */
  #closedUnderUs(error: Error): boolean {
    const use = this.#socketUse;
    return (
      !this.#resent &&
      use !== undefined &&
      use.reused &&
      use.idleMs >= IDLE_CLOSE_RACE_MS &&
      this.#slot !== undefined &&
      !this.#waiting &&
      this.#status === 0 &&
      !this.#sawData &&
      use.socket.bytesRead === use.bytesReadAtStart &&
      isClosedSocketError(error)
    );
  }

  /** A complete 2xx answer rewritten by the leg's codec (an unreadable answer fails the leg like a broken one). */
  #relayWhole(codec: AnswerCodec, body: Buffer): void {
    let answer;
    try {
      answer = codec.whole(body, this.#contentType);
    } catch (err) {
      this.#fail(upstreamTransportError(this.#failure(), asError(err)));
      return;
    }
    if (answer.usage !== undefined) this.#owner.recordUsage(answer.usage.promptTokens, answer.usage.completionTokens);
    this.#contentType = answer.contentType;
    if (!this.#writeHead(answer.body.length)) return;
    this.#owner.endClient(answer.body);
    this.#succeed(undefined);
  }

  /** A non-2xx answer the codec judges: relayed to the client when it says so, and the leg fails either way. */
  #failedAnswer(codec: AnswerCodec, body: Buffer): void {
    const { error, answer } = codec.failed(this.#status, body);
    if (answer !== undefined) {
      this.#contentType = answer.contentType;
      if (!this.#writeHead(answer.body.length)) return;
      this.#owner.endClient(answer.body);
    }
    this.#fail(error);
  }

  /**
   * An engine's event stream (a relayed 2xx answer that no codec translates) is read for its first event: comments
   * before it (vLLM's keep-alives while it waits) are not an answer yet, and its first byte counts only once that event
   * is not an error (a vLLM decode whose KV load failed opens its stream with the error: it took no KV).
   */
  get #readsFirstEvent(): boolean {
    return this.#sse !== undefined && this.#codec === undefined && !this.#failed;
  }

  /**
   * Reads an engine stream's first event (`out` starts with it) before anything went out. A stream that opens with an
   * error is answered as the status the engine would have given had its stream not been open: a refusal (SGLang checks
   * some fields only once its stream is open) is the client's 4xx, anything else a failed leg (a vLLM KV load or EC
   * read that failed, an engine error, an SGLang decode whose KV never came), retried like an HTTP 500 instead of a 200
   * stream holding an error. Returns the leg's failure; otherwise its first byte is told.
   */
  #firstEventFailure(out: Buffer): Error | undefined {
    const failed = leadingFailure(out);
    if (failed !== undefined) {
      return failed.status < 500
        ? upstreamHttpError({ ...this.#failure(), status: failed.status }, failed.message)
        : leadingErrorEventError(this.#failure(), failed.message);
    }
    this.#tellFirstByte();
    return undefined;
  }

  /** The answer has begun: a relayed or tapped leg's first-byte budget is spent. */
  #firstData(): void {
    this.#sawData = true;
    if (this.#mode === LegMode.Relay || this.#mode === LegMode.Tap) this.#clearTimer();
  }

  /** Calls the spec's `onFirstByte` once. */
  #tellFirstByte(): void {
    const told = this.#onFirstByte;
    this.#onFirstByte = undefined;
    told?.();
  }

  /** Writes the response head once; a client that is already gone fails the leg. */
  #writeHead(contentLength: number): boolean {
    if (this.#headWritten) return true;
    this.#headWritten = true;
    if (this.#owner.commit(this.#status, this.#contentType, contentLength)) return true;
    this.abort(clientAbortedError());
    return false;
  }

  #failure(): LegFailure {
    return { stage: this.stage, endpoint: this.endpoint.key, item: this.item, status: this.#status };
  }

  #clearTimer(): void {
    if (this.#timer !== undefined) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
    }
  }

  /** The transport writes the request next, in the same call (or the leg settled without it). */
  #writeDone(): void {
    if (!this.#writePending) return;
    this.#writePending = false;
    legWriteDone();
  }

  #succeed(answer: BufferedAnswer | undefined): void {
    this.#settled = true;
    this.#writeDone();
    if (this.#socketUse !== undefined) socketFreed(this.#socketUse.socket);
    this.#clearTimer();
    this.#releaseSlot();
    this.#owner.legSettled(this, { ok: true, status: this.#status });
    this.#resolve(answer);
  }

  #fail(err: Error): void {
    this.#settled = true;
    this.#writeDone();
    // An error answer (a 4xx or 5xx) leaves its socket kept alive; a broken one is never used again.
    if (this.#socketUse !== undefined) socketFreed(this.#socketUse.socket);
    this.#clearTimer();
    this.#releaseSlot();
    this.#owner.legSettled(this, { ok: false, status: this.#status, error: err });
    this.#reject(err);
  }
}
