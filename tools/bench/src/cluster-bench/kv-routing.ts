import { join } from 'node:path';
import type { KvEventsSimOptions } from '@triad/engine-sim';
import { defaultSchedulerConfig } from '@triad/scheduling';
import { writeVlTokenizer } from '@triad/testing';

/**
 * Precise prefix routing in the cluster benchmark: the engines publish vLLM KV events from their engine cores'
 * block pools, a `triad kv-indexer` follows them, and the scheduler scores with `precise-prefix-cache`, whose block
 * keys the gateway computes from the engines' own tokenization: vLLM's render endpoint, which returns the
 * processed token ids and each image's hash and placement, as a vision-language deployment whose clients send
 * images without a `uuid` must (docs/kv-events.md).
 */

/** vLLM's defaults the engines hash with: `--block-size 16`, `--prefix-caching-hash-algo sha256`, PYTHONHASHSEED=0. */
const HASHING = { blockSize: 16, hashAlgo: 'sha256', hashSeed: '0' } as const;

/**
 * Writes the model's tokenizer directory under `dir`: the shipped tokenizer with an image pad token, a chat template
 * with one `<|role|>` line per message, and a Qwen2-VL processor config (a 448×448 image is 256 placeholder tokens,
 * the engine-sim's image size), so the engines expand the workload's images as a Qwen2-VL engine does.
 */
export function writeBenchTokenizer(dir: string): string {
  return writeVlTokenizer(join(dir, 'tokenizer'));
}

/** An engine's `--kv-events-config`: PUB on its pod address and `port`, hashing as the router does. */
export function engineKvEvents(host: string, port: number, tokenizerDir: string): KvEventsSimOptions {
  return { endpoint: `tcp://${host}:${port}`, tokenizer: tokenizerDir, ...HASHING };
}

/** The pod annotation that tells the pod-watcher (and so the kv-indexer) where the engine publishes. */
export function kvEventsAnnotation(port: number): string {
  return `triad.io/kv-events-endpoint: "tcp://*:${port}"`;
}

/**
 * Triad's default config with `precise-prefix-cache` in place of `prefix-cache` (same weight; the approximate
 * scorer's arguments as its fallback for pods without events), hashing as the engines do; every model tokenized by
 * its engines' render endpoint (`source: engine, vllmEndpoint: render`: images without a uuid get the engine's
 * item hashes), the benchmark's tokenizer in the gateway to skip prompts shorter than a block and as the fallback
 * (docs/scheduler.md, docs/kv-events.md *Configuration*).
 */
export function preciseSchedulerConfig(tokenizerDir: string): object {
  const config = defaultSchedulerConfig();
  const prefix = config.plugins.find((p) => p.type === 'prefix-cache');
  return {
    ...config,
    plugins: [
      ...config.plugins.filter((p) => p.type !== 'prefix-cache'),
      {
        type: 'precise-prefix-cache',
        args: {
          blockSize: HASHING.blockSize,
          hashAlgo: HASHING.hashAlgo,
          hashSeed: HASHING.hashSeed,
          tokenizers: [{ model: '*', source: 'engine', vllmEndpoint: 'render', path: tokenizerDir }],
          ...(prefix?.args ? { fallback: prefix.args } : {}),
        },
      },
    ],
    profiles: Object.fromEntries(
      Object.entries(config.profiles).map(([role, profile]) => [
        role,
        { ...profile, scorers: profile.scorers.map((s) => (s.plugin === 'prefix-cache' ? { ...s, plugin: 'precise-prefix-cache' } : s)) },
      ]),
    ),
  };
}
