import { readFileSync } from 'node:fs';
import { formatProblem, validateManifests } from '@triad/crd';

/** `triad validate FILE...`: prints each object's verdict and every problem; returns the exit code. */
export function validateCommand(files: readonly string[], out: NodeJS.WritableStream): number {
  let invalid = 0;
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
      if (r.status === 'invalid') {
        invalid += 1;
        out.write(`${file}:${r.line}  ${id}  INVALID\n`);
        for (const p of r.problems) out.write(`    ${formatProblem(p)}\n`);
      } else if (r.status === 'skipped') {
        out.write(`${file}:${r.line}  ${id}  skipped (not a Triad kind)\n`);
      } else {
        counts.set(r.kind, (counts.get(r.kind) ?? 0) + 1);
      }
    }
    const summary = [...counts].map(([k, n]) => `${n} ${k}`).join(', ');
    if (summary) out.write(`${file}: valid: ${summary}\n`);
    if (results.length === 0) out.write(`${file}: no documents\n`);
  }
  out.write(invalid === 0 ? 'all objects valid\n' : `${invalid} invalid object(s)\n`);
  return invalid === 0 ? 0 : 1;
}
