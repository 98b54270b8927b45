import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Writes `<dir>/scheduler.yaml`: a config whose only scorer is precise-prefix-cache, hashing as vLLM does by default
 * in these tests' engines (16-token blocks, sha256, seed "0"), with the given per-ModelServer tokenizers; returns its
 * path. (JSON is YAML.)
 */
export function writePreciseOnlyConfig(dir: string, tokenizers: readonly Record<string, unknown>[]): string {
  const configFile = join(dir, 'scheduler.yaml');
  const plugin = { type: 'precise-prefix-cache', args: { blockSize: 16, hashAlgo: 'sha256', hashSeed: '0', tokenizers } };
  const config = { plugins: [plugin], profiles: { default: { scorers: [{ plugin: 'precise-prefix-cache', weight: 10 }] } } };
  writeFileSync(configFile, JSON.stringify(config));
  return configFile;
}
