import { JetStreamApiError, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { Kvm, type KV, type KvOptions } from '@nats-io/kv';
import type { Bucket } from '@nats-io/kv/internal';
import type { NatsConnection } from '@nats-io/transport-node';
import { retry } from '@triad/runtime';
import { NOT_YET_VISIBLE, isJetStreamConflict, isTransientJetStreamError } from './js-retry';

/** A key no record uses; the probe below never writes it (its compare-and-set names a revision no key reaches). */
const PROBE_KEY = '_serving';
const NEVER = Number.MAX_SAFE_INTEGER;
/**
 * What a create answers when it raced another client's create of the same bucket; the next try finds that bucket:
 * JSStreamSubjectOverlapErr (10065) and, when the two asked for different options, JSStreamNameExistErr (10058).
 */
const CREATE_COLLIDED = new Set([10065, 10058]);
/**
 * The first probe's timeout: a dropped request is asked again soon instead of after a whole request timeout. Each
 * probe that fails doubles it (up to the request timeout), so a server slower than this still gets to answer.
 */
const FIRST_PROBE_TIMEOUT_MS = 250;
/** nats.js's JetStream request timeout, used when the caller sets none. */
const DEFAULT_REQUEST_TIMEOUT_MS = 5_000;

export interface OpenKvBucketOptions {
  /** The bucket's own options (history, replicas, ttl, ...), passed to the create as they are. */
  readonly bucket?: Partial<KvOptions>;
  /** Timeout of each JetStream request of the open and of the bucket returned (default: nats.js's 5 s). */
  readonly timeoutMs?: number;
  /**
   * How long the open keeps retrying a create that failed transiently or collided, and probing a bucket that does
   * not serve yet (default: no limit, until it opens or the connection closes: a start-up step).
   */
  readonly budgetMs?: number;
  /** Called before each retry (metrics, a log). */
  readonly onRetry?: (err: Error, attempt: number) => void;
  /**
   * Whether to wait for the stream to serve (default true). A caller that already saw this bucket's stream serve
   * (on the same connection) skips the two probe requests when it opens the bucket again.
   */
  readonly probe?: boolean;
}

/**
 * Opens a KV bucket (creating it when missing) and returns once its stream serves reads and writes.
 *
 * Replicas that start together create their buckets at the same moment, and nats-server 2.9 shows a stream being
 * created to STREAM.INFO (and answers an identical STREAM.CREATE) before that stream has subscribed to its
 * subjects. The client whose create found the other's stream then had its first write answered by no responders
 * (JetStreamNotEnabled) or its first direct get dropped (a timeout of a whole request timeout). Or the two creates
 * collided outright (subjects overlap). Measured with two connections creating the same fresh bucket 300 times:
 * 7-11 first writes and about 1 first get failed that way (admission's budget store), and 4-13 first puts or gets
 * needed a retry (Bus.kv); none once the stream answered the probes below. The write probe publishes to the bucket
 * (a compare-and-set the stream refuses), so a client needs publish permission on it: Triad sets no NATS permissions.
 */
export async function openKvBucket(nc: NatsConnection, name: string, opts: OpenKvBucketOptions = {}): Promise<KV> {
  const timeoutMs = opts.timeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
  const deadline = Date.now() + (opts.budgetMs ?? Number.POSITIVE_INFINITY);
  const policy = (retryable: (err: unknown) => boolean) => ({
    initialMs: 10,
    maxMs: 1000,
    budgetMs: deadline - Date.now(),
    retryable,
    ...(opts.onRetry ? { onRetry: (err: unknown, attempt: number) => opts.onRetry?.(err as Error, attempt) } : {}),
  });

  const kvm = new Kvm(jetstream(nc, { timeout: timeoutMs }));
  const kv = await retry(
    () => kvm.create(name, opts.bucket ?? {}),
    // On a cluster, a node whose meta view lags can answer "not found" about the stream another client just made.
    policy(
      (err) =>
        isTransientJetStreamError(err) || NOT_YET_VISIBLE(err) || (err instanceof JetStreamApiError && CREATE_COLLIDED.has(err.code)),
    ),
  );

  // nats.js's bucket knows its stream, whether its gets are direct gets (from the create or the stream's info), and
  // the subject a get names (public on its Bucket class).
  if (opts.probe === false) return kv;
  const bucket = kv as unknown as Pick<Bucket, 'stream' | 'direct' | 'subjectForKey'>;
  const probeSubject = bucket.subjectForKey(PROBE_KEY);
  let probeMs = Math.min(timeoutMs, FIRST_PROBE_TIMEOUT_MS);
  await retry(async () => {
    const ms = probeMs;
    probeMs = Math.min(timeoutMs, probeMs * 2);
    // Writes: a compare-and-set that cannot match is refused by a serving stream and reaches no one before.
    try {
      await kv.update(PROBE_KEY, new Uint8Array(0), NEVER, ms);
    } catch (err) {
      if (!isJetStreamConflict(err)) throw err;
    }
    // Reads: KV gets go to the stream's direct get subject when it allows them (else to its leader, as writes do).
    if (bucket.direct) {
      const probe = await jetstreamManager(nc, { timeout: ms, checkAPI: false });
      await probe.direct.getMessage(bucket.stream, { last_by_subj: probeSubject });
    }
  }, policy(isTransientJetStreamError));
  return kv;
}
