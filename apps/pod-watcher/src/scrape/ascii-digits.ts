/**
 * bytes[from, to) as a non-negative integer when it is 1 to `maxDigits` ASCII digits, else -1: the one reader of
 * the small numbers a scrape takes from bytes (an HTTP status, a Content-Length, a `dp_rank` label).
 */
export function digitsValue(bytes: Uint8Array, from: number, to: number, maxDigits: number): number {
  if (to <= from || to - from > maxDigits) return -1;
  let n = 0;
  for (let i = from; i < to; i++) {
    const d = bytes[i] - 48;
    if (d < 0 || d > 9) return -1;
    n = n * 10 + d;
  }
  return n;
}
