/**
 * Benchmark results as JSON that keep their infinities. `JSON.stringify` writes `Infinity` (a failed request's
 * latency, a p99 over refused requests) as `null`, which reads back as 0 — the best figure instead of the worst.
 * Infinities are written as the string "Infinity" and read back as numbers.
 */
export function stringifyResults(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => (v === Infinity ? 'Infinity' : v === -Infinity ? '-Infinity' : v), 2);
}

export function parseResults<T>(text: string): T {
  return JSON.parse(text, (_key, v: unknown) => (v === 'Infinity' ? Infinity : v === '-Infinity' ? -Infinity : v)) as T;
}
