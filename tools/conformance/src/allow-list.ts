import type { Difference } from './diff';

/**
 * A difference Triad makes on purpose. Patterns are globs (`*` any run of characters, `?` one) over the reference's
 * name, the case name and the difference's key; `triad`, when given, must match Triad's side too (as text), so an
 * entry allows one specific behaviour, not whatever Triad happens to do there.
 */
export interface AllowEntry {
  readonly id: string;
  /** One glob or several (any may match). */
  readonly reference: string | readonly string[];
  readonly case: string;
  readonly key: string | readonly string[];
  readonly triad?: string;
  readonly reason: string;
}

export interface Classified {
  readonly allowed: readonly { readonly difference: Difference; readonly entry: AllowEntry }[];
  /** Differences no entry covers: bugs until fixed or reasoned into the allow-list. */
  readonly unexplained: readonly Difference[];
  /** Entries that matched nothing in this run (stale, or their case was not run). */
  readonly unused: readonly AllowEntry[];
}

const globCache = new Map<string, RegExp>();

export function globMatches(glob: string, text: string): boolean {
  let re = globCache.get(glob);
  if (re === undefined) {
    const body = glob
      .split('')
      .map((ch) => (ch === '*' ? '.*' : ch === '?' ? '.' : ch.replace(/[.+^${}()|[\]\\]/g, '\\$&')))
      .join('');
    re = new RegExp(`^${body}$`, 's');
    globCache.set(glob, re);
  }
  return re.test(text);
}

function asText(v: unknown): string {
  return typeof v === 'string' ? v : JSON.stringify(v);
}

function anyMatches(globs: string | readonly string[], text: string): boolean {
  return typeof globs === 'string' ? globMatches(globs, text) : globs.some((g) => globMatches(g, text));
}

export function entryMatches(entry: AllowEntry, reference: string, d: Difference): boolean {
  return (
    anyMatches(entry.reference, reference) &&
    globMatches(entry.case, d.case) &&
    anyMatches(entry.key, d.key) &&
    (entry.triad === undefined || globMatches(entry.triad, asText(d.triad)))
  );
}

/** Sorts one reference's differences into allowed (first matching entry) and unexplained. */
export function classify(reference: string, differences: readonly Difference[], entries: readonly AllowEntry[]): Classified {
  const allowed: { difference: Difference; entry: AllowEntry }[] = [];
  const unexplained: Difference[] = [];
  const used = new Set<string>();
  for (const d of differences) {
    const entry = entries.find((e) => entryMatches(e, reference, d));
    if (entry) {
      allowed.push({ difference: d, entry });
      used.add(entry.id);
    } else unexplained.push(d);
  }
  const unused = entries.filter((e) => !used.has(e.id) && anyMatches(e.reference, reference));
  return { allowed, unexplained, unused };
}
