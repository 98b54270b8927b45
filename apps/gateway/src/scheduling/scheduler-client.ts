import { TimeoutError, headers as natsHeaders, type MsgHdrs, type NatsConnection } from '@nats-io/transport-node';
import { SCHEMA_VERSION, Subjects, type DecisionOrError, type SchedulingRequest } from '@triad/bus';
import { ErrorCode, isErrorCode } from '@triad/errors';
import { SchedulingError, type RequestContext } from '@triad/request';
import type { TurnFlushable, TurnFlusher } from '../nats/turn-flusher';
import { checkScheduleReply } from './schedule-reply';

/** A decision and where it came from. */
export interface Scheduled {
  readonly decision: DecisionOrError;
  /** Decided by the gateway's local fallback, not the scheduler service. */
  readonly local: boolean;
}

/** Why a decision was made by the local fallback instead of the scheduler service. */
export const LOCAL_REASONS = ['timeout', 'unavailable', 'invalid-reply', 'backoff'] as const;
export type LocalReason = (typeof LOCAL_REASONS)[number];

/** Synchronous local decisions with libs/scheduling over the gateway's own KV view. */
export interface LocalDecider {
  schedule(request: SchedulingRequest): DecisionOrError;
}

export interface SchedulerClientOptions {
  /** Decide every request with the local decider and never ask the scheduler service (`--scheduling in-process`). */
  readonly inProcess?: boolean;
  /** How long a batch may wait for its reply before its requests are decided locally. */
  readonly budgetMs: number;
  /** After a failure, decide locally for this long before trying the scheduler again. */
  readonly backoffMs: number;
  readonly maxBatch: number;
  readonly maxInFlight: number;
  /** Counts local decisions by reason (metrics). */
  readonly onLocal?: (reason: LocalReason, count: number) => void;
  /** Observes each NATS round-trip (batch size, seconds). */
  readonly onBatch?: (size: number, seconds: number) => void;
  /** NATS headers for a batch from its requests (W3C trace context; set only when tracing is on). */
  readonly batchHeaders?: (requests: readonly (RequestContext | undefined)[]) => Record<string, string> | undefined;
}

interface Pending {
  readonly request: SchedulingRequest;
  readonly ctx: RequestContext | undefined;
  readonly resolve: (value: Scheduled) => void;
}

const encoder = new TextEncoder();

/**
 * Asks the scheduler service for decisions over `triad.v1.schedule`, micro-batched without any timer: requests
 * that arrive in the same event-loop turn, or while the in-flight limit is reached, travel together in one
 * message (up to `maxBatch`), and at most `maxInFlight` messages are outstanding. When the scheduler does not
 * answer within the budget, answers nonsense, or is not there at all, the batch is decided locally — and the
 * client keeps deciding locally for `backoffMs` before it probes the scheduler again — so an outage degrades
 * placement quality, not availability.
 */
export class SchedulerClient implements TurnFlushable {
  readonly #nc: NatsConnection;
  readonly #local: LocalDecider | undefined;
  readonly #options: SchedulerClientOptions;
  readonly #turn: TurnFlusher;
  #queue: Pending[] = [];
  #inFlight = 0;
  #localUntil = 0;
  /** The decider when scheduling in-process (then never a NATS request). */
  readonly #inProcess: LocalDecider | undefined;

  constructor(nc: NatsConnection, local: LocalDecider | undefined, options: SchedulerClientOptions, turn: TurnFlusher) {
    if (options.inProcess === true && local === undefined) throw new Error('in-process scheduling needs a local decider');
    this.#nc = nc;
    this.#local = local;
    this.#inProcess = options.inProcess === true ? local : undefined;
    this.#options = options;
    this.#turn = turn;
    turn.add(this);
  }

  /** Messages currently awaiting a reply. */
  get inFlight(): number {
    return this.#inFlight;
  }

  /** Decides one request; `ctx`, the request it is for, is handed to `batchHeaders`. */
  schedule(request: SchedulingRequest, ctx?: RequestContext): Promise<Scheduled> {
    if (this.#inProcess !== undefined) return Promise.resolve({ decision: this.#inProcess.schedule(request), local: true });
    if (this.#localUntil > 0) {
      if (Date.now() < this.#localUntil) return Promise.resolve(this.#decideLocally(request, 'backoff'));
      this.#localUntil = 0;
    }
    return new Promise<Scheduled>((resolve) => {
      this.#queue.push({ request, ctx, resolve });
      if (this.#inFlight < this.#options.maxInFlight) this.#turn.request();
    });
  }

  flushTurn(): void {
    this.flush();
  }

  /** Sends what is queued, as far as the in-flight limit allows. */
  flush(): void {
    while (this.#queue.length > 0 && this.#inFlight < this.#options.maxInFlight) {
      const batch = this.#queue.length <= this.#options.maxBatch ? this.#queue : this.#queue.slice(0, this.#options.maxBatch);
      this.#queue = batch === this.#queue ? [] : this.#queue.slice(this.#options.maxBatch);
      void this.#send(batch);
    }
  }

  async #send(batch: Pending[]): Promise<void> {
    this.#inFlight++;
    const started = performance.now();
    const requests = new Array<SchedulingRequest>(batch.length);
    for (let i = 0; i < batch.length; i++) requests[i] = batch[i].request;
    try {
      const data = encoder.encode(JSON.stringify({ v: SCHEMA_VERSION, requests }));
      const msg = await this.#nc.request(Subjects.schedule, data, { timeout: this.#options.budgetMs, ...this.#headersOf(batch) });
      const checked = checkScheduleReply(msg.data, batch.length);
      this.#options.onBatch?.(batch.length, (performance.now() - started) / 1000);
      if (typeof checked === 'string') this.#fallBack(batch, 'invalid-reply');
      else for (let i = 0; i < batch.length; i++) batch[i].resolve({ decision: checked[i], local: false });
    } catch (err) {
      // nats.js rejects a request that ran out of time with TimeoutError; no responders, a closed or draining
      // connection and a disconnect are RequestError or connection errors: the scheduler is unavailable.
      this.#fallBack(batch, err instanceof TimeoutError ? 'timeout' : 'unavailable');
    } finally {
      this.#inFlight--;
      // What queued up behind the in-flight limit goes out at the end of this turn, together.
      if (this.#queue.length > 0) this.#turn.request();
    }
  }

  #headersOf(batch: Pending[]): { headers?: MsgHdrs } {
    if (this.#options.batchHeaders === undefined) return {};
    const map = this.#options.batchHeaders(batch.map((p) => p.ctx));
    if (map === undefined || Object.keys(map).length === 0) return {};
    const h = natsHeaders();
    for (const [k, v] of Object.entries(map)) h.set(k, v);
    return { headers: h };
  }

  #fallBack(batch: Pending[], reason: LocalReason): void {
    if (this.#options.backoffMs > 0) this.#localUntil = Date.now() + this.#options.backoffMs;
    for (const p of batch) p.resolve(this.#decideLocally(p.request, reason));
  }

  #decideLocally(request: SchedulingRequest, reason: LocalReason): Scheduled {
    this.#options.onLocal?.(reason, 1);
    if (this.#local === undefined) {
      return {
        decision: { id: request.id, ok: false, code: ErrorCode.BusUnavailable, message: `scheduler ${reason} and no local scheduling` },
        local: true,
      };
    }
    return { decision: this.#local.schedule(request), local: true };
  }
}

/** The error for a decision the scheduler could not make (an unknown code counts as no candidates). */
export function schedulingError(code: string, message: string): SchedulingError {
  return new SchedulingError(isErrorCode(code) ? code : ErrorCode.SchedNoCandidates, message);
}
