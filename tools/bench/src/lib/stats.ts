/** The median (the mean of the middle two for an even count). */
export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/**
 * How much worse `value` is than `base`, as a signed percentage ("+12.3%"): a rise when higher is worse
 * (latency, CPU), a fall otherwise (throughput).
 */
export function relativeCost(value: number, base: number, higherIsWorse: boolean): string {
  const c = higherIsWorse ? (value - base) / base : (base - value) / base;
  return `${c >= 0 ? '+' : ''}${(c * 100).toFixed(1)}%`;
}
