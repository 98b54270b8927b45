import { readFileSync } from 'node:fs';
import { formatProblem, validateManifests, type ValidationProblem } from '@triad/crd';

export interface ValidateOptions {
  /** Warnings (fields the API server would drop or require, Gateway API features not served) fail too. */
  readonly strict?: boolean;
}

/**
 * `triad validate FILE...`: prints each object's verdict, every problem and every warning; returns the exit code
 * (1 when any object is invalid, or with `strict` has a warning).
 */
export function validateCommand(files: readonly string[], out: NodeJS.WritableStream, opts: ValidateOptions = {}): number {
  let invalid = 0;
  let warned = 0;
  for (const file of files) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (err) {
      out.write(`${file}: cannot read: ${(err as Error).message}\n`);
      invalid += 1;
      continue;
    }
    const results = validateManifests(text);
    const counts = new Map<string, number>();
    for (const r of results) {
      const id = `${r.kind} ${r.namespace ?? 'default'}/${r.name ?? '(unnamed)'}`;
      const failsStrict = opts.strict === true && r.warnings.length > 0;
      if (r.warnings.length > 0) warned += 1;
      if (r.status === 'invalid' || failsStrict) {
        invalid += 1;
        out.write(`${file}:${r.line}  ${id}  INVALID${r.status === 'invalid' ? '' : ' (--strict)'}\n`);
      } else if (r.status === 'skipped') {
        out.write(`${file}:${r.line}  ${id}  skipped (not a kind Triad reads)\n`);
      } else {
        counts.set(r.kind, (counts.get(r.kind) ?? 0) + 1);
        if (r.warnings.length > 0) out.write(`${file}:${r.line}  ${id}  valid, with warnings\n`);
      }
      // `file:line:column` of the field itself, the form editors and terminals jump to.
      const at = (p: ValidationProblem) => `${file}:${p.line ?? r.line}:${p.column ?? 1}`;
      for (const p of r.problems) out.write(`    ${at(p)}  ${formatProblem(p)}\n`);
      for (const w of r.warnings) out.write(`    ${at(w)}  warning: ${formatProblem(w)}\n`);
    }
    const summary = [...counts].map(([k, n]) => `${n} ${k}`).join(', ');
    if (summary) out.write(`${file}: valid: ${summary}\n`);
    if (results.length === 0) out.write(`${file}: no documents\n`);
  }
  const warnings = warned > 0 ? `; ${warned} with warnings${opts.strict ? '' : ' (--strict makes them errors)'}` : '';
  out.write(invalid === 0 ? `all objects valid${warnings}\n` : `${invalid} invalid object(s)${warnings}\n`);
  return invalid === 0 ? 0 : 1;
}
