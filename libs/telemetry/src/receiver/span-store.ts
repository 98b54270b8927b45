import type { ReceivedSpan } from './span-model';
import { summarizeTrace, type TraceSummary } from './span-tree';

export interface WaitForSpansOptions {
  /** How many matching spans to wait for (default 1). */
  readonly count?: number;
  /** Default 10 s. */
  readonly timeoutMs?: number;
  /** Named in the timeout error. */
  readonly what?: string;
}

/**
 * Received spans in memory, indexed by trace, with waiters woken on every arrival (no polling, no sleeps).
 * Bounded: beyond `maxSpans` the oldest traces are dropped whole.
 */
export class SpanStore {
  readonly #maxSpans: number;
  #spans: ReceivedSpan[] = [];
  readonly #byTrace = new Map<string, ReceivedSpan[]>();
  readonly #waiters = new Set<{ check: () => boolean; fail: (err: Error) => void }>();

  constructor(maxSpans = 100_000) {
    this.#maxSpans = maxSpans;
  }

  add(spans: readonly ReceivedSpan[]): void {
    if (spans.length === 0) return;
    for (const s of spans) {
      this.#spans.push(s);
      let list = this.#byTrace.get(s.traceId);
      if (!list) this.#byTrace.set(s.traceId, (list = []));
      list.push(s);
    }
    this.#evict();
    for (const w of [...this.#waiters]) w.check();
  }

  #evict(): void {
    if (this.#spans.length <= this.#maxSpans) return;
    let excess = this.#spans.length - this.#maxSpans;
    const dropped = new Set<string>();
    for (const [traceId, list] of this.#byTrace) {
      if (excess <= 0) break;
      dropped.add(traceId);
      excess -= list.length;
      this.#byTrace.delete(traceId);
    }
    this.#spans = this.#spans.filter((s) => !dropped.has(s.traceId));
  }

  all(): ReceivedSpan[] {
    return [...this.#spans];
  }

  byTrace(traceId: string): ReceivedSpan[] {
    return [...(this.#byTrace.get(traceId.toLowerCase()) ?? [])];
  }

  /** Trace ids in the order their first span arrived. */
  traceIds(): string[] {
    return [...this.#byTrace.keys()];
  }

  /** Newest traces first (by start time). */
  summaries(limit = 20): TraceSummary[] {
    return [...this.#byTrace.entries()]
      .map(([id, spans]) => summarizeTrace(id, spans))
      .sort((a, b) => b.startMs - a.startMs)
      .slice(0, Math.max(0, limit));
  }

  clear(): void {
    this.#spans = [];
    this.#byTrace.clear();
  }

  /** Resolves with the matching spans once at least `count` have arrived; rejects after the timeout. */
  waitFor(predicate: (span: ReceivedSpan) => boolean, opts: WaitForSpansOptions = {}): Promise<ReceivedSpan[]> {
    const count = opts.count ?? 1;
    const timeoutMs = opts.timeoutMs ?? 10_000;
    return new Promise((resolve, reject) => {
      let matched: ReceivedSpan[] = [];
      const waiter = {
        check: (): boolean => {
          matched = this.#spans.filter(predicate);
          if (matched.length < count) return false;
          clearTimeout(timer);
          this.#waiters.delete(waiter);
          resolve(matched);
          return true;
        },
        fail: (err: Error) => {
          clearTimeout(timer);
          this.#waiters.delete(waiter);
          reject(err);
        },
      };
      const timer = setTimeout(() => {
        waiter.fail(
          new Error(
            `timed out after ${timeoutMs} ms waiting for ${count} span(s)${opts.what ? ` (${opts.what})` : ''}: ` +
              `${matched.length} matched of ${this.#spans.length} received`,
          ),
        );
      }, timeoutMs);
      this.#waiters.add(waiter);
      waiter.check();
    });
  }

  /** Rejects every pending wait (the receiver is closing). */
  failWaiters(reason: string): void {
    for (const w of [...this.#waiters]) w.fail(new Error(reason));
  }
}
