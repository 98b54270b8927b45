import type { FairnessConfig } from '../config/admission-config';
import type { AdmissionMetrics } from '../metrics';

/** A slot granted by the queue; give it back when the request is finished (concurrency mode). */
export interface QueuePermit {
  /** Milliseconds spent waiting in the queue. */
  readonly waitedMs: number;
  release(): void;
}

export type QueueOutcome = { ok: true; permit: QueuePermit } | { ok: false; reason: 'timeout' | 'aborted' | 'full' };

/** Span-event hook: the gateway passes its request span (OTel `Span.addEvent` has this shape). */
export interface SpanLike {
  addEvent(name: string, attributes?: Record<string, string | number | boolean>): unknown;
}

/** A started request's slot (a class, not a closure: one is made per request). */
class Permit implements QueuePermit {
  #queue: FairQueue | undefined;
  readonly waitedMs: number;

  constructor(queue: FairQueue, waitedMs: number) {
    this.#queue = queue;
    this.waitedMs = waitedMs;
  }

  release(): void {
    const queue = this.#queue;
    this.#queue = undefined;
    queue?.returned();
  }
}

interface Entry {
  readonly seq: number;
  readonly user: string | undefined;
  readonly enqueuedAt: number;
  readonly resolve: (o: QueueOutcome) => void;
  readonly span: SpanLike | undefined;
  cleanup: () => void;
}

export interface FairQueueDeps {
  readonly config: () => FairnessConfig;
  /** Current priority of a user (lower first), computed at dequeue time so it is never stale. */
  readonly priority: (user: string | undefined) => number;
  readonly metrics: AdmissionMetrics;
  readonly userLabel: (user: string | undefined) => string;
  readonly now: () => number;
}

/**
 * One model's fairness queue. Each user has a FIFO; the next request comes from the user with the lowest
 * recent weighted usage (ties: earliest arrival). Requests start when a concurrency slot is free
 * (`maxConcurrent` > 0) or at `maxQps`. A timed-out or abandoned request leaves the queue at once.
 */
export class FairQueue {
  readonly #model: string;
  readonly #deps: FairQueueDeps;
  readonly #byUser = new Map<string | undefined, Entry[]>();
  #waiting = 0;
  #inflight = 0;
  #seq = 0;
  #nextStartAt = 0;
  #timer: NodeJS.Timeout | undefined;

  constructor(model: string, deps: FairQueueDeps) {
    this.#model = model;
    this.#deps = deps;
  }

  get waiting(): number {
    return this.#waiting;
  }

  get inflight(): number {
    return this.#inflight;
  }

  acquire(user: string | undefined, signal?: AbortSignal, span?: SpanLike): QueueOutcome | Promise<QueueOutcome> {
    const cfg = this.#deps.config();
    if (signal?.aborted) return { ok: false, reason: 'aborted' };
    const now = this.#deps.now();
    if (this.#waiting === 0 && this.#canStart(cfg, now)) return { ok: true, permit: this.#start(user, now, now, span) };
    if (cfg.maxQueueSize > 0 && this.#waiting >= cfg.maxQueueSize) return { ok: false, reason: 'full' };
    return new Promise<QueueOutcome>((resolve) => {
      const entry: Entry = { seq: this.#seq++, user, enqueuedAt: now, resolve, span, cleanup: () => undefined };
      const timer = setTimeout(() => this.#cancel(entry, 'timeout'), cfg.queueTimeout);
      timer.unref();
      const onAbort = (): void => this.#cancel(entry, 'aborted');
      signal?.addEventListener('abort', onAbort, { once: true });
      entry.cleanup = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
      };
      let list = this.#byUser.get(user);
      if (!list) this.#byUser.set(user, (list = []));
      list.push(entry);
      this.#waiting++;
      this.#deps.metrics.queueSize.inc({ model: this.#model, user_id: this.#deps.userLabel(user) });
      span?.addEvent('triad.admission.queued', { 'triad.queue.depth': this.#waiting });
      this.#pump();
    });
  }

  #canStart(cfg: FairnessConfig, now: number): boolean {
    return cfg.maxConcurrent > 0 ? this.#inflight < cfg.maxConcurrent : now >= this.#nextStartAt;
  }

  #start(user: string | undefined, enqueuedAt: number, now: number, span: SpanLike | undefined): QueuePermit {
    const cfg = this.#deps.config();
    if (cfg.maxConcurrent <= 0) this.#nextStartAt = Math.max(now, this.#nextStartAt) + 1000 / cfg.maxQps;
    this.#inflight++;
    const labels = { model: this.#model, user_id: this.#deps.userLabel(user) };
    const waitedMs = now - enqueuedAt;
    this.#deps.metrics.queueDequeued.inc(labels);
    this.#deps.metrics.queueDuration.observe(labels, waitedMs / 1000);
    span?.addEvent('triad.admission.dequeued', { 'triad.queue.wait_ms': waitedMs });
    return new Permit(this, waitedMs);
  }

  /** A permit came back (once per permit, see {@link Permit}). */
  returned(): void {
    this.#inflight--;
    this.#pump();
  }

  /** Starts as many waiting requests as capacity allows, best user first; re-arms the QPS timer. */
  #pump(): void {
    const cfg = this.#deps.config();
    let now = this.#deps.now();
    while (this.#waiting > 0 && this.#canStart(cfg, now)) {
      const entry = this.#takeBest();
      entry.cleanup();
      this.#deps.metrics.queueSize.dec({ model: this.#model, user_id: this.#deps.userLabel(entry.user) });
      entry.resolve({ ok: true, permit: this.#start(entry.user, entry.enqueuedAt, now, entry.span) });
      now = this.#deps.now();
    }
    if (this.#waiting > 0 && cfg.maxConcurrent <= 0 && !this.#timer) {
      this.#timer = setTimeout(
        () => {
          this.#timer = undefined;
          this.#pump();
        },
        Math.max(0, this.#nextStartAt - now),
      );
      this.#timer.unref();
    }
  }

  /** Nothing waiting, nothing in flight, and no QPS spacing still owed: the owner may drop the queue. */
  idle(now: number): boolean {
    return this.#waiting === 0 && this.#inflight === 0 && now >= this.#nextStartAt;
  }

  #takeBest(): Entry {
    let best: { user: string | undefined; list: Entry[]; prio: number } | undefined;
    for (const [user, list] of this.#byUser) {
      const prio = this.#deps.priority(user);
      const head = list[0];
      if (!best || prio < best.prio || (prio === best.prio && head.seq < best.list[0].seq)) best = { user, list, prio };
    }
    const chosen = best as { user: string | undefined; list: Entry[] };
    const entry = chosen.list.shift() as Entry;
    if (chosen.list.length === 0) this.#byUser.delete(chosen.user);
    this.#waiting--;
    return entry;
  }

  #cancel(entry: Entry, reason: 'timeout' | 'aborted'): void {
    const list = this.#byUser.get(entry.user);
    const i = list ? list.indexOf(entry) : -1;
    if (!list || i < 0) return; // already started
    list.splice(i, 1);
    if (list.length === 0) this.#byUser.delete(entry.user);
    this.#waiting--;
    entry.cleanup();
    const labels = { model: this.#model, user_id: this.#deps.userLabel(entry.user) };
    this.#deps.metrics.queueSize.dec(labels);
    this.#deps.metrics.queueCancelled.inc(labels);
    entry.span?.addEvent('triad.admission.queue_cancelled', { 'triad.queue.reason': reason });
    entry.resolve({ ok: false, reason });
  }

  /** Refuses everything still waiting (shutdown). */
  drain(): void {
    for (const list of [...this.#byUser.values()]) for (const e of [...list]) this.#cancel(e, 'aborted');
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
  }
}
