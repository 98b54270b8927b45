import type { z } from 'zod';

/** Levenshtein distance, case-insensitive (argument names differ in case in typos too). */
export function editDistance(a: string, b: string): number {
  const s = a.toLowerCase();
  const t = b.toLowerCase();
  let prev = Array.from({ length: t.length + 1 }, (_, j) => j);
  for (let i = 1; i <= s.length; i++) {
    const cur = [i];
    for (let j = 1; j <= t.length; j++) {
      cur[j] = Math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (s[i - 1] === t[j - 1] ? 0 : 1));
    }
    prev = cur;
  }
  return prev[t.length];
}

/** The known name an unknown one is probably a typo of: within two edits (one for names up to 4 characters). */
export function closestName(name: string, known: readonly string[]): string | undefined {
  const limit = name.length <= 4 ? 1 : 2;
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const k of known) {
    const d = editDistance(name, k);
    if (d <= limit && d < bestDistance) {
      best = k;
      bestDistance = d;
    }
  }
  return best;
}

/** The object schema at `path` inside `schema` (through pipes, transforms, defaults, optionals and arrays). */
function objectShapeAt(schema: z.ZodType, path: readonly PropertyKey[]): Record<string, unknown> | undefined {
  let s: unknown = schema;
  const unwrap = (): void => {
    for (let guard = 0; guard < 16; guard++) {
      const def = (s as { def?: Record<string, unknown> }).def;
      if (!def) return;
      if (def['type'] === 'pipe') s = def['in'];
      else if (def['type'] === 'default' || def['type'] === 'optional' || def['type'] === 'nullable' || def['type'] === 'prefault')
        s = def['innerType'];
      else return;
    }
  };
  unwrap();
  for (const key of path) {
    const def = (s as { def?: Record<string, unknown> }).def;
    if (def?.['type'] === 'array' && typeof key === 'number') s = def['element'];
    else if (def?.['type'] === 'object') s = (def['shape'] as Record<string, unknown>)[String(key)];
    else return undefined;
    unwrap();
  }
  const def = (s as { def?: Record<string, unknown> }).def;
  return def?.['type'] === 'object' ? (def['shape'] as Record<string, unknown>) : undefined;
}

export interface UnknownArgs {
  /** Arguments to strip before validating again: path → names. */
  readonly strip: { readonly path: readonly PropertyKey[]; readonly names: readonly string[] }[];
  /** Unknown names that are one or two edits from a known one: refused with the suggestion. */
  readonly typos: { readonly path: readonly PropertyKey[]; readonly name: string; readonly suggestion: string }[];
}

/**
 * Sorts the unrecognized keys of a failed validation into typos of known arguments and arguments Triad does not
 * know (newer Kthena releases add some: Kthena ignores what its own version does not read, so a config written for
 * a newer Kthena must still load). Undefined when the failure is about something else too.
 */
export function classifyUnknownArgs(schema: z.ZodType, issues: readonly z.core.$ZodIssue[]): UnknownArgs | undefined {
  if (issues.length === 0 || issues.some((i) => i.code !== 'unrecognized_keys')) return undefined;
  const strip: { path: readonly PropertyKey[]; names: string[] }[] = [];
  const typos: { path: readonly PropertyKey[]; name: string; suggestion: string }[] = [];
  for (const issue of issues as z.core.$ZodIssueUnrecognizedKeys[]) {
    const known = Object.keys(objectShapeAt(schema, issue.path) ?? {});
    const names: string[] = [];
    for (const name of issue.keys) {
      const suggestion = closestName(name, known);
      if (suggestion !== undefined) typos.push({ path: issue.path, name, suggestion });
      else names.push(name);
    }
    if (names.length > 0) strip.push({ path: issue.path, names });
  }
  return { strip, typos };
}

/** A copy of `args` without the named keys at each path. */
export function withoutArgs(args: unknown, strip: UnknownArgs['strip']): unknown {
  const copy = structuredClone(args) as Record<PropertyKey, unknown>;
  for (const { path, names } of strip) {
    let target: unknown = copy;
    for (const key of path) target = (target as Record<PropertyKey, unknown> | undefined)?.[key];
    if (typeof target === 'object' && target !== null) for (const n of names) delete (target as Record<string, unknown>)[n];
  }
  return copy;
}
