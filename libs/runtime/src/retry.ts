/** Exponential backoff: `initialMs`, doubling per attempt up to `maxMs`. */
export interface BackoffPolicy {
  readonly initialMs: number;
  readonly maxMs: number;
  /**
   * Draw each delay from [half, all] of its step, so many replicas retrying the same failure (an API server or a
   * JetStream leader coming back) do not retry in step. Off by default.
   */
  readonly jitter?: boolean;
}

/** The delay before retry number `attempt` (0 for the first retry). */
export function backoffDelay(policy: BackoffPolicy, attempt: number): number {
  const step = Math.min(policy.maxMs, policy.initialMs * 2 ** Math.min(attempt, 30));
  return policy.jitter ? Math.round(step / 2 + Math.random() * (step / 2)) : step;
}

export interface RetryOptions extends BackoffPolicy {
  /** Which failures are worth another try (by error class or code, never by message text); default: every one. */
  readonly retryable?: (err: unknown) => boolean;
  /** Total time to keep trying; the last error is thrown once the next wait would pass it. Default: no limit. */
  readonly budgetMs?: number;
  /** Called before each wait (metrics, logs, readiness reasons); `attempt` counts the failed tries so far. */
  readonly onRetry?: (err: unknown, attempt: number, delayMs: number) => void;
}

/**
 * Runs `call` until it succeeds, waiting {@link backoffDelay} between tries: Triad's one retry loop for calls to
 * its dependencies (JetStream, NATS at startup). A failure that is not `retryable`, or that comes when the budget
 * is spent, is thrown as it is.
 */
export async function retry<T>(call: () => Promise<T>, options: RetryOptions): Promise<T> {
  const deadline = options.budgetMs === undefined ? Infinity : Date.now() + options.budgetMs;
  for (let attempt = 0; ; attempt++) {
    try {
      return await call();
    } catch (err) {
      const delay = backoffDelay(options, attempt);
      if ((options.retryable && !options.retryable(err)) || Date.now() + delay > deadline) throw err;
      options.onRetry?.(err, attempt + 1, delay);
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
  }
}
