/** How long a JetStream call keeps retrying through a leader election or a node's loss by default. */
export const DEFAULT_JS_RETRY_BUDGET_MS = 20_000;

/** Errors whose description says a conflict the caller must resolve (compare-and-set), never retried here. */
const CONFLICT = /wrong last sequence|key exists/i;
/**
 * What a clustered JetStream answers while a stream's (or the meta) leader is being elected, or while the node a
 * client was on is gone: no responder yet, a timeout, "JetStream system temporarily unavailable" (503, 10008),
 * a stream or its peers offline.
 */
const TRANSIENT = /no responders|timeout|temporarily unavailable|offline|no suitable peers|leader|disconnect/i;

/** A JetStream failure worth another try once the cluster has a leader again. */
export function isTransientJetStreamError(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  if (err.name === 'ClosedConnectionError' || err.name === 'DrainingConnectionError') return false;
  const status = (err as { status?: unknown }).status;
  const text = errorText(err);
  if (CONFLICT.test(text)) return false;
  return status === 503 || TRANSIENT.test(text);
}

export interface JetStreamRetryOptions {
  /** Total time to keep trying (default 20 s: nats-server 2.9 elects a new stream leader within 4-9 s of losing one). */
  readonly budgetMs?: number;
  /** Called before each retry (metrics, a debug log). */
  readonly onRetry?: (err: Error, attempt: number) => void;
  /**
   * More errors to treat as transient for this call only: on a cluster, a stream or consumer just created can be
   * "not found" for a moment when the request reaches a node whose view of the meta layer lags (NOT_YET_VISIBLE).
   */
  readonly alsoTransient?: RegExp;
}

/**
 * What a clustered JetStream answers about a stream or consumer this client has just created (or opened) while the
 * node it asks has not applied the creation yet. Retried only by calls that know the thing exists.
 */
export const NOT_YET_VISIBLE = /stream not found|consumer not found/i;

/**
 * The retry of a start-up step (opening a bucket, a watch's first consumer): its owner cannot go on without it, so
 * it keeps trying through a node's loss however long the cluster takes, like the first connection does. Right after
 * a node is lost, each JetStream request the cluster places on the dead node times out (5 s), and a bucket open is
 * several requests; a 20 s budget ran out and failed a gateway's start. It still stops on a closed connection.
 */
export function startUpRetry(retry: JetStreamRetryOptions): JetStreamRetryOptions {
  return { ...retry, budgetMs: Number.POSITIVE_INFINITY, alsoTransient: NOT_YET_VISIBLE };
}

function errorText(err: Error): string {
  return `${err.name} ${err.message} ${err.cause instanceof Error ? `${err.cause.name} ${err.cause.message}` : ''}`;
}

/**
 * Runs a JetStream call, retrying transient failures (leader election, a lost node, a reconnect) with backoff
 * (50 ms doubling to 1 s) until the budget is spent; the last error is thrown. A retried write may already
 * have landed: plain puts are idempotent, and compare-and-set callers already handle a conflict by re-reading.
 */
export async function retryJetStream<T>(call: () => Promise<T>, options: JetStreamRetryOptions = {}): Promise<T> {
  const deadline = Date.now() + (options.budgetMs ?? DEFAULT_JS_RETRY_BUDGET_MS);
  let delay = 50;
  for (let attempt = 1; ; attempt++) {
    try {
      return await call();
    } catch (err) {
      const retriable =
        isTransientJetStreamError(err) ||
        (options.alsoTransient !== undefined && err instanceof Error && options.alsoTransient.test(errorText(err)));
      if (!retriable || Date.now() + delay > deadline) throw err;
      options.onRetry?.(err as Error, attempt);
      await new Promise((resolve) => setTimeout(resolve, delay));
      delay = Math.min(delay * 2, 1000);
    }
  }
}
