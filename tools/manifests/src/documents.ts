import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { LineCounter, parseAllDocuments } from 'yaml';

/** One YAML document of a manifest file, with where it starts (for messages). */
export interface ManifestDoc {
  /** Path relative to the workspace root. */
  readonly file: string;
  readonly line: number;
  readonly value: Record<string, unknown>;
}

export interface ParsedFile {
  readonly docs: readonly ManifestDoc[];
  /** YAML syntax errors and documents that are not objects, as `file:line message`. */
  readonly problems: readonly string[];
}

/** Every `.yaml`/`.yml` file below `dir`, sorted, as absolute paths. */
export function yamlFilesUnder(dir: string): string[] {
  const found: string[] = [];
  for (const entry of readdirSync(dir).sort()) {
    const full = join(dir, entry);
    if (statSync(full).isDirectory()) found.push(...yamlFilesUnder(full));
    else if (/\.ya?ml$/.test(entry)) found.push(full);
  }
  return found;
}

/** Parses a multi-document YAML file; empty documents are skipped. */
export function parseManifestFile(root: string, path: string): ParsedFile {
  const file = relative(root, path);
  const lineCounter = new LineCounter();
  const docs: ManifestDoc[] = [];
  const problems: string[] = [];
  for (const doc of parseAllDocuments(readFileSync(path, 'utf8'), { lineCounter })) {
    const line = lineCounter.linePos(doc.contents?.range?.[0] ?? doc.range[0]).line;
    if (doc.errors.length > 0) {
      for (const e of doc.errors) problems.push(`${file}:${lineCounter.linePos(e.pos[0]).line} YAML error: ${e.message.split('\n')[0]}`);
      continue;
    }
    const value: unknown = doc.toJS();
    if (value === null || value === undefined) continue;
    if (typeof value !== 'object' || Array.isArray(value)) {
      problems.push(`${file}:${line} a manifest document must be an object`);
      continue;
    }
    docs.push({ file, line, value: value as Record<string, unknown> });
  }
  return { docs, problems };
}

/** `file:line Kind/name`, how a problem names the object it is about. */
export function where(doc: ManifestDoc): string {
  const meta = (doc.value['metadata'] ?? {}) as Record<string, unknown>;
  return `${doc.file}:${doc.line} ${String(doc.value['kind'])}/${String(meta['name'] ?? '(unnamed)')}`;
}

export const kindOf = (doc: ManifestDoc): string => String(doc.value['kind'] ?? '');
export const nameOf = (doc: ManifestDoc): string => String(((doc.value['metadata'] ?? {}) as Record<string, unknown>)['name'] ?? '');
