import type { SimEngine } from './engine';
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
  },
};

const RANDOM_CONFIG = { profiles: { default: { filters: [], scorers: ['random'] } } };
const LEAST_REQUEST_CONFIG = { profiles: { default: { filters: ['least-request'], scorers: ['least-request'] } } };

export type PolicyName = 'triad' | 'random' | 'round-robin' | 'least-request' | 'kthena' | 'oracle';
export const POLICY_NAMES: readonly PolicyName[] = ['triad', 'random', 'round-robin', 'least-request', 'kthena', 'oracle'];

/** The policies compared in one run; every scheduler-backed one runs libs/scheduling's real code. */
export function makePolicy(name: PolicyName, engines: readonly SimEngine[], triadConfig?: unknown): RoutingPolicy {
  const n = engines.length;
  switch (name) {
    case 'triad': return new SchedulerPolicy(n, {
      name: triadConfig === undefined ? 'triad (default)' : 'triad (--triad-config)', mediaAwareHashes: true, sessions: true,
      ...(triadConfig === undefined ? {} : { config: triadConfig }),
    });
    case 'random': return new SchedulerPolicy(n, { name: 'random', config: RANDOM_CONFIG, mediaAwareHashes: false, sessions: false });
    case 'round-robin': return new RoundRobinPolicy(n);
    case 'least-request': return new SchedulerPolicy(n, { name: 'least-request', config: LEAST_REQUEST_CONFIG, mediaAwareHashes: false, sessions: false });
    case 'kthena': return new SchedulerPolicy(n, { name: 'kthena default', config: KTHENA_DEFAULT_CONFIG, mediaAwareHashes: false, sessions: false });
    case 'oracle': return new OraclePolicy(engines);
  }
}
