import type { MetricFamily } from './parse';

type Families = ReadonlyMap<string, MetricFamily>;

/**
 * Sum of a gauge or counter over every series (DP ranks, several model_name label sets), or undefined when the
 * family is absent. Kthena kept only the last series; summing is what a per-pod load figure needs.
 */
export function sumSamples(families: Families, name: string): number | undefined {
  const fam = families.get(name);
  if (!fam) return undefined;
  let total = 0;
  let seen = false;
  for (const s of fam.samples) {
    if (s.name === name || s.name === `${name}_total`) {
      total += s.value;
      seen = true;
    }
  }
  return seen ? total : undefined;
}

/** Largest value of a gauge over its series (for ratios such as KV-cache usage, where a sum is meaningless). */
export function maxSample(families: Families, name: string): number | undefined {
  const fam = families.get(name);
  if (!fam) return undefined;
  let max: number | undefined;
  for (const s of fam.samples) if (s.name === name && (max === undefined || s.value > max)) max = s.value;
  return max;
}

/** Total `_sum` and `_count` of a histogram across all its series. */
export function histogramTotals(families: Families, name: string): { sum: number; count: number } | undefined {
  const fam = families.get(name);
  if (!fam) return undefined;
  let sum = 0;
  let count = 0;
  let seen = false;
  for (const s of fam.samples) {
    if (s.name === `${name}_sum`) {
      sum += s.value;
      seen = true;
    } else if (s.name === `${name}_count`) {
      count += s.value;
      seen = true;
    }
  }
  return seen ? { sum, count } : undefined;
}
