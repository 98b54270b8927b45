import { copyFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { KvEventsSimOptions } from '@triad/engine-sim';
import { defaultSchedulerConfig } from '@triad/scheduling';

/**
 * Precise prefix routing in the cluster benchmark: the engines publish vLLM KV events from their engine cores'
 * block pools, a `triad kv-indexer` follows them, and the scheduler scores with `precise-prefix-cache`, whose block
 * keys the gateway computes with the same tokenizer and chat template the engines use (docs/kv-events.md).
 */

/** The tokenizer shipped for tests and the local stack (Apache-2.0, infra/tokenizers/NOTICE.md). */
const SHIPPED_TOKENIZER = resolve(__dirname, '../../../../infra/tokenizers/bert-base-uncased/tokenizer.json');
/** A small chat template (`triad up` uses the same shape): one `<|role|>content` line per message. */
const CHAT_TEMPLATE =
  '{% for m in messages %}<|{{ m.role }}|>{{ m.content }}\n{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}';
/** vLLM's defaults the engines hash with: `--block-size 16`, `--prefix-caching-hash-algo sha256`, PYTHONHASHSEED=0. */
const HASHING = { blockSize: 16, hashAlgo: 'sha256', hashSeed: '0' } as const;

/** Writes the model's tokenizer directory (tokenizer.json + tokenizer_config.json with the template) under `dir`. */
export function writeBenchTokenizer(dir: string): string {
  const out = join(dir, 'tokenizer');
  mkdirSync(out, { recursive: true });
  copyFileSync(SHIPPED_TOKENIZER, join(out, 'tokenizer.json'));
  writeFileSync(join(out, 'tokenizer_config.json'), JSON.stringify({ chat_template: CHAT_TEMPLATE }));
  return out;
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
 * scorer's arguments as its fallback for pods without events), hashing as the engines do, the benchmark's tokenizer
 * for every model (docs/scheduler.md, docs/kv-events.md *Configuration*).
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
          tokenizers: [{ model: '*', path: tokenizerDir }],
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
