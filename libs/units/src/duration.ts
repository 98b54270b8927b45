import type { UnitResult } from './result';

const UNIT_MS: Readonly<Record<string, number>> = {
  ns: 1e-6,
  us: 1e-3,
  µs: 1e-3,
  μs: 1e-3,
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};
// Go accepts both micro signs, U+00B5 and the Greek U+03BC; escaped, so the bundle's source stays Latin-1 (one byte
// per character in V8: see tools/scripts/build.mjs).
const PART = /(\d+(?:\.\d*)?|\.\d+)(ns|us|\u00b5s|\u03bcs|ms|s|m|h)/y;
const BARE_NUMBER = /^(\d+(?:\.\d*)?|\.\d+)$/;

/**
 * Parses a Go `time.Duration` string (what Kubernetes `metav1.Duration` fields hold: `1m30s`, `100ms`, `1.5h`)
 * into milliseconds. Returns undefined for anything Go would reject; negative durations are not accepted here
 * because no Triad field means anything by them.
 */
export function parseGoDuration(text: string): number | undefined {
  if (text === '0') return 0;
  if (text.length === 0) return undefined;
  let total = 0;
  PART.lastIndex = 0;
  while (PART.lastIndex < text.length) {
    const start = PART.lastIndex;
    const m = PART.exec(text);
    if (!m || m.index !== start) return undefined;
    total += Number(m[1]) * UNIT_MS[m[2]];
  }
  return Number.isFinite(total) ? total : undefined;
}

/** The unit of a duration written as a bare number: what the setting was always counted in. */
export type BareDurationUnit = 'ms' | 's';

const BARE_NAME: Record<BareDurationUnit, string> = { ms: 'milliseconds', s: 'seconds' };

/** What a duration setting accepts, for help texts and errors. */
export function durationHint(bareUnit: BareDurationUnit = 'ms'): string {
  return `a duration such as 500ms, 10s or 1m30s (a bare number is ${BARE_NAME[bareUnit]})`;
}

/**
 * A duration as settings and flags take it: a Go duration (`250ms`, `10s`, `1m30s`; spaces between a number and
 * its unit are allowed) or a bare number in `bareUnit` (`250` is 250 ms for a `*-ms` setting, 250 s for one counted
 * in seconds). Returns milliseconds, or undefined when it is neither.
 */
export function parseDuration(value: string | number, bareUnit: BareDurationUnit = 'ms'): number | undefined {
  const scale = bareUnit === 's' ? 1000 : 1;
  if (typeof value === 'number') return Number.isFinite(value) && value >= 0 ? value * scale : undefined;
  // `1m 30s` and `30 s` read as `1m30s` and `30s`.
  const text = value.trim().replace(/\s+/g, '');
  if (BARE_NUMBER.test(text)) return Number(text) * scale;
  return parseGoDuration(text);
}

/** Milliseconds the way Go prints a duration: `500ms`, `1.5s`, `10s`, `1m30s`, `2h`. */
export function formatDuration(ms: number): string {
  if (ms === 0) return '0s';
  if (ms < 1000) return `${ms}ms`;
  if (ms % 1000 !== 0) return `${ms / 1000}s`;
  let seconds = ms / 1000;
  const hours = Math.floor(seconds / 3600);
  seconds -= hours * 3600;
  const minutes = Math.floor(seconds / 60);
  seconds -= minutes * 60;
  return `${hours ? `${hours}h` : ''}${minutes ? `${minutes}m` : ''}${seconds ? `${seconds}s` : ''}`;
}

/** Bounds of a duration setting, in milliseconds; `bareUnit` is how a bare number counts. */
export interface DurationRule {
  readonly bareUnit?: BareDurationUnit;
  readonly min?: number;
  readonly max?: number;
}

/**
 * Reads a duration setting (string or number) and checks its bounds: whole milliseconds from `min` to `max`.
 * The error says what is accepted and repeats the value given.
 */
export function checkDuration(value: unknown, rule: DurationRule = {}): UnitResult {
  const bareUnit = rule.bareUnit ?? 'ms';
  const shown = typeof value === 'string' ? `'${value}'` : String(value);
  const ms = typeof value === 'string' || typeof value === 'number' ? parseDuration(value, bareUnit) : undefined;
  if (ms === undefined) return { ok: false, error: `expected ${durationHint(bareUnit)}, got ${shown}` };
  if (!Number.isInteger(ms)) return { ok: false, error: `must be a whole number of milliseconds, got ${shown}` };
  if (rule.min !== undefined && ms < rule.min) return { ok: false, error: `must be at least ${formatDuration(rule.min)}, got ${shown}` };
  if (rule.max !== undefined && ms > rule.max) return { ok: false, error: `must be at most ${formatDuration(rule.max)}, got ${shown}` };
  return { ok: true, value: ms };
}
