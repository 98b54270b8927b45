import { JetStreamApiError } from '@nats-io/jetstream';
import { retry } from '@triad/runtime';

/** How long a JetStream call keeps retrying through a leader election or a node's loss by default. */
export const DEFAULT_JS_RETRY_BUDGET_MS = 20_000;

/**
 * JetStream API error codes (nats-server's errors.json) that a clustered server answers while a stream's or the
 * meta group's leader is being elected, or while a peer it needs is gone (docs/deployment.md, NATS node loss).
 */
const TRANSIENT_API_CODES = new Set([
  10004, // JSClusterIncompleteErr: incomplete results
  10005, // JSClusterNoPeersErrF: no suitable peers (for placement)
  10007, // JSClusterNotAssignedErr: cluster not assigned to this server
  10008, // JSClusterNotAvailErr: JetStream system temporarily unavailable (503)
  10009, // JSClusterNotLeaderErr: cluster can not handle request
  10040, // JSClusterPeerNotMemberErr: peer not a member (yet)
  10118, // JSStreamOfflineErr
  10119, // JSConsumerOfflineErr
  10194, // JSStreamOfflineReasonErrF
  10195, // JSConsumerOfflineReasonErrF
]);

/** Compare-and-set conflicts (wrong last sequence): the caller re-reads and decides; never retried here. */
const CONFLICT_API_CODES = new Set([
  10071, // JSStreamWrongLastSequenceErrF (a KV update at a stale revision, a create of a key that exists)
  10164, // JSStreamWrongLastSequenceConstantErr
]);

/** The JetStream API error code of `err` or of an error it wraps; undefined for other failures. */
function apiCodeOf(err: unknown): number | undefined {
  for (let e = err, depth = 0; e instanceof Error && depth < 4; e = e.cause, depth++) {
    if (e instanceof JetStreamApiError) return e.code;
    const code = (e as { apiCode?: unknown }).apiCode;
    if (typeof code === 'number') return code;
  }
  return undefined;
}

/** True when `err` (or what it wraps) is a lost compare-and-set: the key changed since the revision read. */
export function isJetStreamConflict(err: unknown): boolean {
  const code = apiCodeOf(err);
  return code !== undefined && CONFLICT_API_CODES.has(code);
}

/**
 * A JetStream failure worth another try once the cluster has a leader again, by the failure's class and code
 * (never its message): a request nobody answered in time (`TimeoutError`), no responder yet (`RequestError` of
 * no responders, or nats.js's `JetStreamNotEnabled` wrapping one), a request cut by a reconnect (`RequestError`),
 * a consumer status 408/409/503 (`JetStreamStatusError`, e.g. a leadership change), an API error with a status of
 * 503 or a code of {@link TRANSIENT_API_CODES}. A closed or draining connection, or a conflict, is final.
 */
export function isTransientJetStreamError(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const apiCode = apiCodeOf(err);
  if (apiCode !== undefined) {
    if (CONFLICT_API_CODES.has(apiCode)) return false;
    if (TRANSIENT_API_CODES.has(apiCode)) return true;
  }
  switch (err.name) {
    case 'ClosedConnectionError':
    case 'DrainingConnectionError':
      return false;
    case 'TimeoutError':
    case 'RequestError':
    case 'NoResponders':
      return true;
    case 'JetStreamNotEnabled':
      // nats.js reports "no responders" to a JetStream request this way; "not enabled for the account" wraps an
      // API error instead, and is final.
      return err.cause instanceof Error && err.cause.name === 'RequestError';
    case 'JetStreamStatusError': {
      const code = (err as { code?: unknown }).code;
      return code === 408 || code === 409 || code === 503;
    }
  }
  return (err as { status?: unknown }).status === 503 && apiCode !== 10039 && apiCode !== 10076;
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
  readonly alsoTransient?: (err: unknown) => boolean;
}

/**
 * What a clustered JetStream answers about a stream or consumer this client has just created (or opened) while the
 * node it asks has not applied the creation yet: stream not found (10059) or consumer not found (10014), nats.js's
 * StreamNotFoundError and ConsumerNotFoundError. Retried only by calls that know the thing exists.
 */
export function NOT_YET_VISIBLE(err: unknown): boolean {
  const code = apiCodeOf(err);
  if (code === 10059 || code === 10014) return true;
  return err instanceof Error && (err.name === 'StreamNotFoundError' || err.name === 'ConsumerNotFoundError');
}

/**
 * The retry of a start-up step (opening a bucket, a watch's first consumer): its owner cannot go on without it, so
 * it keeps trying through a node's loss however long the cluster takes, like the first connection does. Right after
 * a node is lost, each JetStream request the cluster places on the dead node times out (5 s), and a bucket open is
 * several requests; a 20 s budget ran out and failed a gateway's start. It still stops on a closed connection.
 */
export function startUpRetry(retry: JetStreamRetryOptions): JetStreamRetryOptions {
  return { ...retry, budgetMs: Number.POSITIVE_INFINITY, alsoTransient: NOT_YET_VISIBLE };
}

/**
 * Runs a JetStream call, retrying transient failures ({@link isTransientJetStreamError}: leader election, a lost
 * node, a reconnect) with backoff (50 ms doubling to 1 s) until the budget is spent; the last error is thrown. A
 * retried write may already have landed: plain puts are idempotent, and compare-and-set callers already handle
 * a conflict by re-reading.
 */
export function retryJetStream<T>(call: () => Promise<T>, options: JetStreamRetryOptions = {}): Promise<T> {
  return retry(call, {
    initialMs: 50,
    maxMs: 1000,
    budgetMs: options.budgetMs ?? DEFAULT_JS_RETRY_BUDGET_MS,
    retryable: (err) => isTransientJetStreamError(err) || options.alsoTransient?.(err) === true,
    ...(options.onRetry ? { onRetry: (err: unknown, attempt: number) => options.onRetry?.(err as Error, attempt) } : {}),
  });
}
