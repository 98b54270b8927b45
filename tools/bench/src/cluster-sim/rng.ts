import { SeededRandom } from '@triad/testing/reliability';

/** Seeded pseudo-random numbers: the same seed gives the same workload and the same run. */
export class Rng {
  readonly #random: SeededRandom;

  constructor(seed: number) {
    this.#random = new SeededRandom(seed);
  }

  /** Uniform in [0, 1). */
  next(): number {
    return this.#random.next();
  }

  /** Integer in [lo, hi]. */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }

  /** Exponential with the given mean (Poisson inter-arrival times). */
  exp(mean: number): number {
    return -Math.log(1 - this.next()) * mean;
  }

  /** A child generator (independent stream for one purpose, so adding draws elsewhere does not shift it). */
  fork(salt: number): Rng {
    return new Rng(Math.imul(this.int(0, 0x7fffffff) ^ salt, 0x9e3779b1));
  }
}

/** Zipf(s) over ranks 0..n-1 by inverse CDF on a precomputed table: rank 0 is the most popular. */
export class Zipf {
  readonly #cdf: Float64Array;

  constructor(n: number, s: number) {
    this.#cdf = new Float64Array(n);
    let total = 0;
    for (let k = 0; k < n; k++) total += 1 / Math.pow(k + 1, s);
    let acc = 0;
    for (let k = 0; k < n; k++) {
      acc += 1 / Math.pow(k + 1, s) / total;
      this.#cdf[k] = acc;
    }
  }

  sample(rng: Rng): number {
    const u = rng.next();
    let lo = 0,
      hi = this.#cdf.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.#cdf[mid] < u) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}

/** 32-bit mix (murmur3 fmix32), for block keys. */
export function mix32(x: number): number {
  let h = x | 0;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}
