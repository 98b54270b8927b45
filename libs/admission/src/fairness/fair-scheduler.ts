import type { FairnessConfig } from '../config/admission-config';
import type { AdmissionMetrics } from '../metrics';
import { FairQueue, type QueueOutcome, type SpanLike } from './fair-queue';
import { UsageTracker } from './usage-tracker';

/**
 * Kthena's user-fairness scheduling for one gateway replica: a {@link FairQueue} per model (made on first use,
 * dropped when idle) and the usage tracker that orders them. The tracker is per replica, like Kthena's;
 * with the gateway's load spread evenly each replica sees the same heavy users.
 */
export class FairScheduler {
  #config: FairnessConfig;
  readonly #metrics: AdmissionMetrics;
  readonly #now: () => number;
  readonly #userLabel: (user: string | undefined) => string;
  readonly #queues = new Map<string, FairQueue>();
  readonly #tracker: UsageTracker;
  readonly #sweep: NodeJS.Timeout;
  readonly #stopInflightHook: () => void;

  constructor(
    config: FairnessConfig,
    deps: { metrics: AdmissionMetrics; now: () => number; userLabel: (user: string | undefined) => string },
  ) {
    this.#config = config;
    this.#metrics = deps.metrics;
    this.#now = deps.now;
    this.#userLabel = deps.userLabel;
    this.#tracker = new UsageTracker(config.windowSize, deps.now);
    this.#sweep = setInterval(() => this.#dropIdle(), 30_000);
    this.#sweep.unref();
    // In-flight counts change on every request; the gauge reads them only when scraped.
    this.#stopInflightHook = deps.metrics.onCollectInflight(() => {
      for (const [model, q] of this.#queues) deps.metrics.queueInflight.set({ model }, q.inflight);
    });
  }

  get tracker(): UsageTracker {
    return this.#tracker;
  }

  update(config: FairnessConfig): void {
    this.#config = config;
    this.#tracker.windowMs = config.windowSize;
  }

  acquire(model: string, user: string | undefined, signal?: AbortSignal, span?: SpanLike): QueueOutcome | Promise<QueueOutcome> {
    let queue = this.#queues.get(model);
    if (!queue) {
      queue = new FairQueue(model, {
        config: () => this.#config,
        priority: (u) => this.#tracker.priority(model, u, this.#config),
        metrics: this.#metrics,
        userLabel: this.#userLabel,
        now: this.#now,
      });
      this.#queues.set(model, queue);
    }
    return queue.acquire(user, signal, span);
  }

  /** Actual usage of a finished request, whatever its mode (aggregated, PD, EPD). */
  record(model: string, user: string | undefined, inputTokens: number, outputTokens: number): void {
    this.#tracker.record(model, user, inputTokens, outputTokens);
  }

  /** Requests waiting for `model` (all models when omitted). */
  waiting(model?: string): number {
    if (model !== undefined) return this.#queues.get(model)?.waiting ?? 0;
    let n = 0;
    for (const q of this.#queues.values()) n += q.waiting;
    return n;
  }

  #dropIdle(): void {
    const now = this.#now();
    for (const [model, q] of this.#queues) {
      if (!q.idle(now)) continue;
      this.#queues.delete(model);
      this.#metrics.queueInflight.set({ model }, 0);
    }
    this.#tracker.prune();
  }

  close(): void {
    clearInterval(this.#sweep);
    this.#stopInflightHook();
    for (const q of this.#queues.values()) q.drain();
  }
}
