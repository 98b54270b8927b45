import type { ProfileRole } from '../framework/plugin';
import { SchedulerConfigSchema, type ProfileConfig, type SchedulerConfig } from './config-schema';

/**
 * Built-in profiles. Language stages use Kthena's Helm defaults (filter least-request; score least-request,
 * gpu-usage, least-latency, prefix-cache, weight 1 each) plus the stale-metrics filter, which only removes pods
 * with old metrics while fresher ones exist, and Triad's session-affinity and encoder-cache scorers (they score
 * nothing for requests without a session or media), and the prefill-backlog scorer (which prices in-flight prompt
tokens: all pods score 100 while none has a prefill pending). Encoders have no KV cache or token latency, so they are scored on
 * load only and placed by the encoder-affinity picker.
 */
export function builtInProfile(role: ProfileRole): ProfileConfig {
  if (role === 'encode') {
    return { filters: ['stale-metrics', 'least-request'], scorers: [{ plugin: 'least-request', weight: 1 }], picker: 'encoder-affinity' };
  }
  return {
    filters: ['stale-metrics', 'least-request'],
    scorers: [
      { plugin: 'least-request', weight: 1 },
      { plugin: 'gpu-usage', weight: 1 },
      { plugin: 'least-latency', weight: 1 },
      { plugin: 'prefix-cache', weight: 1 },
      { plugin: 'session-affinity', weight: 1 },
      { plugin: 'encoder-cache', weight: 2 },
      // Prices in-flight prompt tokens: keeps the affinities from queueing requests behind a long prompt's prefill.
      { plugin: 'prefill-backlog', weight: 1 },
    ],
    picker: 'max-score',
  };
}

/** The picker a profile gets when it names none. */
export const defaultPicker = (role: ProfileRole): string => (role === 'encode' ? 'encoder-affinity' : 'max-score');

/** The config used when none is given: every default spelled out (what `triad scheduler` logs as effective). */
export function defaultSchedulerConfig(): SchedulerConfig {
  return SchedulerConfigSchema.parse({
    topN: 5,
    plugins: [
      // peak-running, not Kthena's running: requests dispatched since the last scrape are not queued on an engine
      // with free batch slots, and counting them ×100 turned the pod affinity just chose into the worst-scored one.
      { type: 'least-request', args: { maxWaitingRequests: 10, queueEstimate: 'peak-running' } },
      { type: 'gpu-usage' },
      // Relative, not Kthena's min-max: scraped means of pods a few per cent apart must not swing 100 points and
      // outvote the cache affinities (cluster benchmark: least-latency decided 27 % of image-qa picks with min-max).
      { type: 'least-latency', args: { TTFTTPOTWeightFactor: 0.5, maxLatencyAgeMs: 30_000, normalization: 'relative' } },
      { type: 'prefix-cache', args: { blockSizeToHash: 64, maxBlocksToMatch: 128, maxHashCacheSize: 50_000, topKMatches: 5 } },
      { type: 'stale-metrics', args: { maxAgeMs: 10_000 } },
      { type: 'max-score' },
      { type: 'encoder-affinity', args: { loadFactor: 1.25 } },
      { type: 'session-affinity', args: { loadFactor: 1.5, maxSessions: 100_000 } },
      // 1.1, not 1.25: a pod holding the images but busy with a long prefill must lose them sooner (routing benchmark, mixed p99).
      { type: 'encoder-cache', args: { loadFactor: 1.1, maxItemsPerEndpoint: 64, homeShare: 1 } },
      { type: 'prefill-backlog', args: { prefillMsPer1kTokens: 50, prefillOverheadMs: 2 } },
    ],
    profiles: {
      default: builtInProfile('decode'),
      encode: builtInProfile('encode'),
    },
  });
}
