import { readFileSync } from 'node:fs';
import type { z } from 'zod';
import { parse as parseYaml } from 'yaml';
import { formatPath } from '@triad/crd';

/** Result of reading a config document: the parsed value, or every problem as `path: message`. */
export type ParseOutcome<T> = { ok: true; value: T } | { ok: false; problems: string[] };

/** Validates an already parsed value against `schema`, listing every issue with its path. */
export function validateDocument<S extends z.ZodType>(schema: S, raw: unknown, source: string): ParseOutcome<z.output<S>> {
  const parsed = schema.safeParse(raw);
  if (parsed.success) return { ok: true, value: parsed.data };
  return { ok: false, problems: parsed.error.issues.map((i) => `${source}: ${formatPath(i.path) || '(root)'}: ${i.message}`) };
}

/** Reads a YAML/JSON file without validating it; a missing or unreadable file is a problem, not an exception. */
export function readDocument(path: string): ParseOutcome<unknown> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    return { ok: false, problems: [`${path}: cannot read: ${(err as Error).message}`] };
  }
  try {
    return { ok: true, value: text.trim() === '' ? {} : (parseYaml(text) ?? {}) };
  } catch (err) {
    return { ok: false, problems: [`${path}: not valid YAML/JSON: ${(err as Error).message}`] };
  }
}

/** Reads and validates a file. */
export function loadDocument<S extends z.ZodType>(schema: S, path: string): ParseOutcome<z.output<S>> {
  const raw = readDocument(path);
  return raw.ok ? validateDocument(schema, raw.value, path) : raw;
}
