import type { UnitResult } from './result';

/** Multipliers by unit prefix: SI (`k`, `M`, `G`: powers of 1000, as Kubernetes quantities) and IEC (`Ki`, `Mi`: of 1024). */
const PREFIX: Readonly<Record<string, number>> = {
  '': 1,
  k: 1e3,
  m: 1e6,
  g: 1e9,
  t: 1e12,
  ki: 2 ** 10,
  mi: 2 ** 20,
  gi: 2 ** 30,
  ti: 2 ** 40,
};
const SIZE = /^(\d+(?:\.\d*)?|\.\d+)\s*(?:([kmgt]i?)b?|b)?$/i;

/** What a size setting accepts, for help texts and errors. */
export const BYTE_SIZE_HINT = 'a size such as 10MiB, 512KiB or 1GB (a bare number is bytes)';

/**
 * A size as settings and flags take it: a number of bytes, or a number with a unit: `10MiB`, `10 MiB`, `10Mi`
 * (IEC, powers of 1024, as Kubernetes writes memory) or `10MB`, `10M` (SI, powers of 1000), case-insensitive.
 * Returns bytes (possibly fractional, e.g. `0.1KiB`), or undefined when it is not a size.
 */
export function parseByteSize(value: string | number): number | undefined {
  if (typeof value === 'number') return Number.isFinite(value) && value >= 0 ? value : undefined;
  const m = SIZE.exec(value.trim());
  if (!m) return undefined;
  const bytes = Number(m[1]) * PREFIX[(m[2] ?? '').toLowerCase()];
  return Number.isFinite(bytes) ? bytes : undefined;
}

/** Bytes as people write them: `10 MiB` when a whole number of MiB (or KiB, GiB), else `1500 bytes`. */
export function formatByteSize(bytes: number): string {
  for (const [unit, size] of [
    ['GiB', 2 ** 30],
    ['MiB', 2 ** 20],
    ['KiB', 2 ** 10],
  ] as const) {
    if (bytes >= size && bytes % size === 0) return `${bytes / size} ${unit}`;
  }
  return `${bytes} bytes`;
}

/** Bounds of a size setting, in bytes. */
export interface ByteSizeRule {
  readonly min?: number;
  readonly max?: number;
}

/** Reads a size setting (string or number) and checks it is a whole number of bytes from `min` to `max`. */
export function checkByteSize(value: unknown, rule: ByteSizeRule = {}): UnitResult {
  const shown = typeof value === 'string' ? `'${value}'` : String(value);
  const bytes = typeof value === 'string' || typeof value === 'number' ? parseByteSize(value) : undefined;
  if (bytes === undefined) return { ok: false, error: `expected ${BYTE_SIZE_HINT}, got ${shown}` };
  if (!Number.isInteger(bytes)) return { ok: false, error: `must be a whole number of bytes, got ${shown}` };
  if (rule.min !== undefined && bytes < rule.min) return { ok: false, error: `must be at least ${formatByteSize(rule.min)}, got ${shown}` };
  if (rule.max !== undefined && bytes > rule.max) return { ok: false, error: `must be at most ${formatByteSize(rule.max)}, got ${shown}` };
  return { ok: true, value: bytes };
}
