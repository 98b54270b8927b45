import type { PrefixHashOptions } from '../hashing/prefix-hashes';
import { PrefixCacheScorer } from '../plugins/prefix-cache/prefix-cache';
import type { LoadedSchedulerConfig } from './load-config';

/**
 * The block size and block count the gateway should hash prompts with for this config: those of the first
 * prefix-cache plugin in use, or the defaults when the config has none.
 */
export function prefixHashOptionsOf(config: LoadedSchedulerConfig): PrefixHashOptions {
  for (const profile of Object.values(config.profiles)) {
    for (const { scorer } of profile.scorers) {
      if (scorer instanceof PrefixCacheScorer) return {
        blockSize: scorer.params.blockSizeToHash, maxBlocks: scorer.params.maxBlocksToMatch,
      };
    }
  }
  return {};
}
