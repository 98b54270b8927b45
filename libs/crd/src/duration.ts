import { z } from 'zod';

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
    total += Number(m[1]) * (UNIT_MS[m[2]] as number);
  }
  return Number.isFinite(total) ? total : undefined;
}

/** A Go duration string; the parsed value is obtained with {@link parseGoDuration}. */
export const DurationSchema = z
  .string()
  .refine((s) => parseGoDuration(s) !== undefined, { message: 'must be a Go duration such as 500ms, 10s or 1m30s' })
  .meta({ description: 'Go duration string, e.g. 500ms, 10s, 1m30s' });
