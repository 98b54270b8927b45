import type { SimPool } from './simulate';
import { defaultSchedulerConfig, type SchedulingObserver } from '@triad/scheduling';
import { OraclePolicy, RoundRobinPolicy, SchedulerPolicy, type RoutingPolicy } from './policies';

/** Kthena's Helm defaults: filter least-request; score least-request, gpu-usage, least-latency, prefix-cache (weight 1). */
export const KTHENA_DEFAULT_CONFIG = {
  plugins: [
    { type: 'least-request', args: { maxWaitingRequests: 10 } },
    // Kthena's means never age (see the least-latency README): an age beyond any run.
    { type: 'least-latency', args: { TTFTTPOTWeightFactor: 0.5, maxLatencyAgeMs: 1_000_000_000 } },
    { type: 'prefix-cache', args: { blockSizeToHash: 64, maxBlocksToMatch: 128, maxHashCacheSize: 50_000, topKMatches: 5 } },
  ],
  profiles: {
    default: {
      filters: ['least-request'],
      scorers: ['least-request', 'gpu-usage', 'least-latency', 'prefix-cache'],
      picker: 'max-score',
    },
    // Kthena plans no encoders: in an EPD pool its encoders are placed by load, as its other stages.
    encode: { filters: ['least-request'], scorers: ['least-request'], picker: 'max-score' },
  },
  // Kthena has no per-request disaggregation: every request runs every stage of the pool's mode.
  disaggregation: { localEncode: false, skipPrefill: false },
};

const EVERY = { localEncode: false, skipPrefill: false };
export const RANDOM_CONFIG = {
  profiles: { default: { filters: [], scorers: ['random'] }, encode: { filters: [], scorers: ['random'], picker: 'max-score' } },
  disaggregation: EVERY,
};
export const LEAST_REQUEST_CONFIG = {
  profiles: {
    default: { filters: ['least-request'], scorers: ['least-request'] },
    encode: { filters: ['least-request'], scorers: ['least-request'], picker: 'max-score' },
  },
  disaggregation: EVERY,
};

/** Triad's defaults with every stage of the pool's mode for every request (what a fixed E→P→D pipeline does). */
const EVERY_STAGE = { disaggregation: EVERY };

/** Triad's defaults plus local encode (the consumer encodes up to one uncached item itself). */
const LOCAL_ENCODE = { disaggregation: { localEncode: true } };
/** Triad's defaults with skip-prefill judged on this request's TTFT alone (the decode pods' stall not counted). */
const EAGER_SKIP = { disaggregation: { decodeStallWeight: 0 } };

export type PolicyName =
  | 'triad'
  | 'triad-every-stage'
  | 'triad-local-encode'
  | 'triad-eager-skip'
  | 'random'
  | 'round-robin'
  | 'least-request'
  | 'kthena'
  | 'oracle';
export const POLICY_NAMES: readonly PolicyName[] = ['triad', 'random', 'round-robin', 'least-request', 'kthena', 'oracle'];
/** Policies a run may name beyond the default set. */
export const EXTRA_POLICIES: readonly PolicyName[] = ['triad-every-stage', 'triad-local-encode', 'triad-eager-skip'];

/**
 * The policies compared in one run; every scheduler-backed one runs libs/scheduling's real code (and reports its pick
 * verdicts to `observer`, when given).
 */
export function makePolicy(name: PolicyName, pool: SimPool, triadConfig?: unknown, observer?: SchedulingObserver): RoutingPolicy {
  const n = pool;
  // Each scheduler-backed policy's pick verdicts, when the caller counts them.
  const seen = observer ? { observer } : {};
  switch (name) {
    case 'triad-every-stage':
      return new SchedulerPolicy(n, {
        name: 'triad (every stage)',
        mediaAwareHashes: true,
        sessions: true,
        ...seen,
        config: { ...defaultSchedulerConfig(), ...EVERY_STAGE },
      });
    case 'triad-local-encode':
      return new SchedulerPolicy(n, {
        name: 'triad (+ local encode)',
        mediaAwareHashes: true,
        sessions: true,
        ...seen,
        config: { ...defaultSchedulerConfig(), ...LOCAL_ENCODE },
      });
    case 'triad-eager-skip':
      return new SchedulerPolicy(n, {
        name: 'triad (eager skip)',
        mediaAwareHashes: true,
        sessions: true,
        ...seen,
        config: { ...defaultSchedulerConfig(), ...EAGER_SKIP },
      });
    case 'triad':
      return new SchedulerPolicy(n, {
        name: triadConfig === undefined ? 'triad (default)' : 'triad (--triad-config)',
        mediaAwareHashes: true,
        sessions: true,
        ...seen,
        ...(triadConfig === undefined ? {} : { config: triadConfig }),
      });
    case 'random':
      return new SchedulerPolicy(n, { name: 'random', config: RANDOM_CONFIG, mediaAwareHashes: false, sessions: false, ...seen });
    case 'round-robin':
      return new RoundRobinPolicy(n);
    case 'least-request':
      return new SchedulerPolicy(n, {
        name: 'least-request',
        config: LEAST_REQUEST_CONFIG,
        mediaAwareHashes: false,
        sessions: false,
        ...seen,
      });
    case 'kthena':
      return new SchedulerPolicy(n, {
        name: 'kthena default',
        config: KTHENA_DEFAULT_CONFIG,
        mediaAwareHashes: false,
        sessions: false,
        ...seen,
      });
    case 'oracle':
      return new OraclePolicy(pool);
  }
}
