import {
  createInbox,
  headers as natsHeaders,
  type Msg,
  type MsgHdrs,
  type NatsConnection,
  type Subscription,
} from '@nats-io/transport-node';
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

/** A batch sent to the scheduler service, waiting for its reply on this client's inbox. */
interface Sent {
  readonly batch: Pending[];
  readonly started: number;
  /** When its budget runs out (`performance.now()` time). */
  readonly deadline: number;
}

const encoder = new TextEncoder();

function onBudgetTimer(client: SchedulerClient): void {
  client.budgetTimerFired();
}

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
  /**
   * Replies come to `<inbox>.<batch id>` on one subscription of this client's own, matched to their batch by id:
   * nats.js's `request()` builds a request object, a timeout promise and three Error objects (stack traces
   * included) per call, which at one request per batch was a few percent of the gateway's CPU.
   */
  readonly #inbox: string;
  readonly #sent = new Map<number, Sent>();
  #nextId = 0;
  readonly #replies: Subscription | undefined;
  #closed = false;
  /**
   * One timer for the budgets of every batch in flight, armed for the oldest one's (batches leave in order with the
   * same budget, so the first in `#sent` runs out first) and left armed when its batch is answered: when it fires
   * it decides the batches whose budget ran out locally and re-arms for the next. A timer per batch (a
   * `setTimeout` per send, a `clearTimeout` per reply) was about 4 k instructions per request at 1 connection
   * (callgrind), for a budget that almost never runs out; this one fires at most once per budget while batches come
   * and go.
   */
  #budgetTimer: NodeJS.Timeout | undefined;

  constructor(nc: NatsConnection, local: LocalDecider | undefined, options: SchedulerClientOptions, turn: TurnFlusher) {
    if (options.inProcess === true && local === undefined) throw new Error('in-process scheduling needs a local decider');
    this.#nc = nc;
    this.#local = local;
    this.#inProcess = options.inProcess === true ? local : undefined;
    this.#options = options;
    this.#turn = turn;
    this.#inbox = createInbox();
    // The subscription goes out before any batch on the same connection, so the server knows it before a reply.
    // A subscription error carries no reply (as in the bus's subscribe): a batch then waits out its budget and is
    // decided locally.
    this.#replies =
      this.#inProcess === undefined
        ? nc.subscribe(`${this.#inbox}.*`, {
            callback: (err, msg) => {
              if (!err) this.#reply(msg);
            },
          })
        : undefined;
    turn.add(this);
  }

  /** Messages currently awaiting a reply. */
  get inFlight(): number {
    return this.#inFlight;
  }

  /** Decides one request; `ctx`, the request it is for, is handed to `batchHeaders`. */
  schedule(request: SchedulingRequest, ctx?: RequestContext): Promise<Scheduled> {
    if (this.#inProcess !== undefined) return Promise.resolve({ decision: this.#inProcess.schedule(request), local: true });
    if (this.#closed) return Promise.resolve(this.#decideLocally(request, 'unavailable'));
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

  #send(batch: Pending[]): void {
    const requests = new Array<SchedulingRequest>(batch.length);
    for (let i = 0; i < batch.length; i++) requests[i] = batch[i].request;
    const id = this.#nextId++;
    try {
      const data = encoder.encode(JSON.stringify({ v: SCHEMA_VERSION, requests }));
      this.#nc.publish(Subjects.schedule, data, { reply: `${this.#inbox}.${id}`, ...this.#headersOf(batch) });
    } catch {
      // A closed or draining connection: the scheduler is unavailable.
      this.#fallBack(batch, 'unavailable');
      return;
    }
    this.#inFlight++;
    const started = performance.now();
    this.#sent.set(id, { batch, started, deadline: started + this.#options.budgetMs });
    // An armed timer is for an older batch, whose budget runs out first.
    if (this.#budgetTimer === undefined) this.#armBudget(this.#options.budgetMs);
  }

  /** A reply on the inbox: its batch's decisions, or (no data, status 503) no scheduler subscribed. */
  #reply(msg: Msg): void {
    const subject = msg.subject;
    const sent = this.#settle(Number(subject.slice(subject.lastIndexOf('.') + 1)));
    if (sent === undefined) return; // a reply after the budget ran out: its batch was decided locally
    const batch = sent.batch;
    if (msg.data.length === 0 && msg.headers?.code === 503) {
      this.#fallBack(batch, 'unavailable');
      return;
    }
    const checked = checkScheduleReply(msg.data, batch.length);
    this.#options.onBatch?.(batch.length, (performance.now() - sent.started) / 1000);
    if (typeof checked === 'string') this.#fallBack(batch, 'invalid-reply');
    else for (let i = 0; i < batch.length; i++) batch[i].resolve({ decision: checked[i], local: false });
  }

  /**
   * @internal The budget timer fired: the batches whose budget ran out are decided locally, oldest first, and the
   * timer is armed again for the oldest batch left, if any. A batch within a millisecond of its deadline counts as
   * run out: timers have millisecond granularity and may fire a little before the deadline by this clock.
   */
  budgetTimerFired(): void {
    this.#budgetTimer = undefined;
    const now = performance.now();
    const due: number[] = [];
    let next: Sent | undefined;
    for (const [id, sent] of this.#sent) {
      if (sent.deadline - now >= 1) {
        next = sent;
        break;
      }
      due.push(id);
    }
    if (next !== undefined) this.#armBudget(next.deadline - now);
    for (const id of due) {
      const sent = this.#settle(id);
      if (sent !== undefined) this.#fallBack(sent.batch, 'timeout');
    }
  }

  /**
   * Arms the budget timer, unref'd: it stays armed after the replies of its batches, and must not hold a process
   * open for a budget nobody waits on (a batch in flight keeps the NATS connection, which holds it open anyway).
   */
  #armBudget(ms: number): void {
    const timer = setTimeout(onBudgetTimer, ms, this);
    timer.unref();
    this.#budgetTimer = timer;
  }

  /** Takes batch `id` out of the in-flight set (undefined when it already left); what queued behind it goes out this turn. */
  #settle(id: number): Sent | undefined {
    const sent = this.#sent.get(id);
    if (sent === undefined) return undefined;
    this.#sent.delete(id);
    this.#inFlight--;
    if (this.#queue.length > 0) this.#turn.request();
    return sent;
  }

  /**
   * Stops asking the scheduler service (the gateway is shutting down): every batch still waiting for its reply and
   * every queued request is decided locally now, as when the scheduler is unavailable, so no budget timer outlives
   * the client and no caller waits on a reply that the closing connection will not deliver. Later requests are
   * decided locally too. Idempotent.
   */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#replies?.unsubscribe();
    clearTimeout(this.#budgetTimer);
    this.#budgetTimer = undefined;
    const waiting: Pending[] = [];
    for (const sent of this.#sent.values()) for (const p of sent.batch) waiting.push(p);
    this.#sent.clear();
    this.#inFlight = 0;
    for (const p of this.#queue) waiting.push(p);
    this.#queue = [];
    for (const p of waiting) p.resolve(this.#decideLocally(p.request, 'unavailable'));
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
