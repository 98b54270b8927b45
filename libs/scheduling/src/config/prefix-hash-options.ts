import type { PrefixHashOptions } from '../hashing/prefix-hashes';
import { PrecisePrefixCacheScorer, type PrecisePrefixCacheParams } from '../plugins/precise-prefix-cache/precise-prefix-cache';
import { PrefixCacheScorer } from '../plugins/prefix-cache/prefix-cache';
import type { LoadedSchedulerConfig } from './load-config';

/**
 * The block size and block count the gateway should hash prompts with for this config: those of the first
 * prefix-cache plugin in use, or the defaults when the config has none.
 */
export function prefixHashOptionsOf(config: LoadedSchedulerConfig): PrefixHashOptions {
  for (const profile of Object.values(config.profiles)) {
    for (const { scorer } of profile.scorers) {
      if (scorer instanceof PrefixCacheScorer)
        return {
          blockSize: scorer.params.blockSizeToHash,
          maxBlocks: scorer.params.maxBlocksToMatch,
        };
      if (scorer instanceof PrecisePrefixCacheScorer) {
        return { blockSize: scorer.fallback.params.blockSizeToHash, maxBlocks: scorer.fallback.params.maxBlocksToMatch };
      }
    }
  }
  return {};
}

/** How the gateway computes `kvBlockHashes` for this config: the first `precise-prefix-cache` plugin's arguments. */
export type KvHashOptions = Pick<
  PrecisePrefixCacheParams,
  | 'blockSize'
  | 'maxBlocksToMatch'
  | 'hashAlgo'
  | 'hashSeed'
  | 'tokenizers'
  | 'engineTokenization'
  | 'vllmTokenizerPort'
  | 'sglangTokenizerPort'
> & {
  /** Models without a tokenizer entry are tokenized by their engines (Kthena's `kvcache-aware`). */
  readonly engineByDefault: boolean;
};

/** The KV block hashing the config asks of the gateway, or undefined when no scorer uses engine block keys. */
export function kvHashOptionsOf(config: LoadedSchedulerConfig): KvHashOptions | undefined {
  for (const profile of Object.values(config.profiles)) {
    for (const { scorer } of profile.scorers) {
      if (scorer instanceof PrecisePrefixCacheScorer) {
        const { blockSize, maxBlocksToMatch, hashAlgo, hashSeed, tokenizers, engineTokenization, vllmTokenizerPort, sglangTokenizerPort } =
          scorer.params;
        return {
          blockSize,
          maxBlocksToMatch,
          hashAlgo,
          hashSeed,
          tokenizers,
          engineTokenization,
          ...(vllmTokenizerPort !== undefined ? { vllmTokenizerPort } : {}),
          ...(sglangTokenizerPort !== undefined ? { sglangTokenizerPort } : {}),
          engineByDefault: scorer.engineByDefault,
        };
      }
    }
  }
  return undefined;
}
