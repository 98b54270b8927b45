// Synthetic clusters and request streams for the scheduler benchmark: deterministic (seeded), shaped like real
// fleets (PD groups of 8, EPD groups of 9, spread metrics, shared system prompts, repeated images).
import type { EndpointRecord, ModelServerRecord, SchedulingRequest } from '@triad/bus';
import { prefixBlockHashes } from '@triad/scheduling';
import { endpointRecord, modelServerRecord, schedulingRequest } from '@triad/scheduling/testing';
import { SeededRandom } from '@triad/testing/reliability';

export type BenchMode = 'aggregated' | 'pd' | 'epd';

/** A seeded generator, so every run sees the same cluster. */
export function prng(seed: number): () => number {
  const random = new SeededRandom(seed);
  return () => random.next();
}

/** Name of the ModelServer holding the endpoints of one (mode, size) cell. */
export const modelServerName = (mode: BenchMode, size: number): string => `bench-${mode}-${size}`;

export interface Cluster {
  readonly modelServer: ModelServerRecord;
  readonly endpoints: EndpointRecord[];
}

/** `size` endpoints of one ModelServer in `mode`, metrics scraped at `scrapedAt`. */
export function buildCluster(mode: BenchMode, size: number, scrapedAt: number): Cluster {
  const name = modelServerName(mode, size);
  const rand = prng(size * 31 + mode.length);
  const roles: EndpointRecord['role'][] =
    mode === 'aggregated' ? ['aggregated'] : mode === 'pd' ? ['decode', 'prefill'] : ['decode', 'prefill', 'encode'];
  const perGroup = mode === 'pd' ? 8 : 9;
  const endpoints: EndpointRecord[] = [];
  for (let i = 0; i < size; i++) {
    const role = roles[i % roles.length];
    const group = mode === 'aggregated' ? undefined : `g${Math.floor(i / perGroup)}`;
    endpoints.push(
      endpointRecord({
        pod: `pod-${i}`,
        modelServer: name,
        role,
        ...(group ? { group } : {}),
        ip: `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`,
        port: 8000,
        running: Math.floor(rand() * 16),
        waiting: Math.floor(rand() * 4),
        kv: Math.round(rand() * 90) / 100,
        ttftMs: 40 + rand() * 200,
        tpotMs: 8 + rand() * 30,
        scrapedAt,
      }),
    );
  }
  return { modelServer: modelServerRecord({ name, mode }), endpoints };
}

/** In-flight counts for ~10% of the endpoints (what gateways' dispatch snapshots would carry). */
export function inflightSnapshot(cluster: Cluster): Record<string, number> {
  const rand = prng(cluster.endpoints.length);
  const out: Record<string, number> = {};
  for (const e of cluster.endpoints) {
    if (rand() < 0.1) out[`${e.namespace}.${e.modelServer}.${e.pod}`] = 1 + Math.floor(rand() * 6);
  }
  return out;
}

/** A stream of requests: 20 system prompts with varied user turns (prefix hashes), and 2 images for epd. */
export class RequestStream {
  readonly #hashes: string[][];
  readonly #mode: BenchMode;
  readonly #modelServer: string;
  #n = 0;

  constructor(mode: BenchMode, size: number) {
    this.#mode = mode;
    this.#modelServer = modelServerName(mode, size);
    const rand = prng(7);
    this.#hashes = Array.from({ length: 200 }, (_, i) => {
      const system = `You are assistant #${i % 20}. Follow the house rules carefully. `.repeat(12);
      const user = `question ${i}: ${'lorem ipsum '.repeat(Math.floor(rand() * 60))}`;
      return prefixBlockHashes('m', system + user);
    });
  }

  next(): SchedulingRequest {
    const n = this.#n++;
    return schedulingRequest({
      id: `bench-${n}`,
      modelServer: this.#modelServer,
      prefixHashes: this.#hashes[n % this.#hashes.length],
      mediaItems:
        this.#mode === 'epd'
          ? [
              { index: 0, key: `u:img-${n % 50}`, modality: 'image' },
              { index: 1, key: `u:img-${(n * 7) % 300}`, modality: 'image' },
            ]
          : [],
    });
  }
}

/** Percentile of an ascending-sorted array (nearest rank). */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}
