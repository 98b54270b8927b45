import { JetStreamApiError, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { Kvm, type KV } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import { isJetStreamConflict, isTransientJetStreamError } from '@triad/bus/client';
import { retry } from '@triad/runtime';

/** A key no record uses; the probe below never writes it (its compare-and-set names a revision no key reaches). */
const PROBE_KEY = '_serving';
const NEVER = Number.MAX_SAFE_INTEGER;
/** JSStreamSubjectOverlapErr: a create raced another client's create of the same bucket; the next try finds it. */
const SUBJECT_OVERLAP = 10065;
/** How long one probe waits for an answer: a dropped request is tried again instead of waiting a whole store timeout. */
const PROBE_TIMEOUT_MS = 250;

export interface BudgetBucketOptions {
  readonly replicas: number;
  /** Timeout of each request, and the time the open keeps retrying a bucket that is not serving yet. */
  readonly timeoutMs: number;
}

/**
 * Opens the budget bucket (creating it when missing) and returns once its stream serves reads and writes.
 *
 * Gateway replicas that start together create the bucket at the same moment, and nats-server 2.9 shows a stream
 * being created to STREAM.INFO (and answers an identical STREAM.CREATE) before that stream has subscribed to its
 * subjects. The replica whose create found the other's stream then had its first write answered by no responders
 * (JetStreamNotEnabled) or its first direct get dropped (a timeout of the whole store timeout), and that request's
 * admission was decided by failMode. Or the two creates collided outright (subjects overlap). Measured with two
 * connections creating the same fresh bucket 300 times: 7-11 first writes and about 1 first get failed that way;
 * none once the stream answered the probes below.
 */
export async function openBudgetBucket(nc: NatsConnection, bucket: string, opts: BudgetBucketOptions): Promise<KV> {
  const policy = { initialMs: 10, maxMs: 200, budgetMs: opts.timeoutMs };
  const kvm = new Kvm(jetstream(nc, { timeout: opts.timeoutMs }));
  const kv = await retry(() => kvm.create(bucket, { history: 1, replicas: opts.replicas }), {
    ...policy,
    retryable: (err) => isTransientJetStreamError(err) || (err instanceof JetStreamApiError && err.code === SUBJECT_OVERLAP),
  });
  const probeMs = Math.min(opts.timeoutMs, PROBE_TIMEOUT_MS);
  const { streamInfo } = await kv.status();
  const probe = await jetstreamManager(nc, { timeout: probeMs, checkAPI: false });
  await retry(
    async () => {
      // Writes: a compare-and-set that cannot match is refused by a serving stream and reaches no one before.
      try {
        await kv.update(PROBE_KEY, new Uint8Array(0), NEVER, probeMs);
      } catch (err) {
        if (!isJetStreamConflict(err)) throw err;
      }
      // Reads: KV gets go to the stream's direct get subject when it allows them.
      if (streamInfo.config.allow_direct) {
        await probe.direct.getMessage(streamInfo.config.name, { last_by_subj: `$KV.${bucket}.${PROBE_KEY}` });
      }
    },
    { ...policy, retryable: isTransientJetStreamError },
  );
  return kv;
}
