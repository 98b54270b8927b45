import { mkdirSync, readFileSync, writeFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { renderCrdFiles } from '@triad/crd';

/** `triad crds`: writes infra/crds from the zod schemas, or with `--check` reports whether they are stale. */
export function crdsCommand(opts: { out: string; check?: boolean }, out: NodeJS.WritableStream): number {
  const files = renderCrdFiles();
  let stale = 0;
  if (!opts.check) mkdirSync(opts.out, { recursive: true });
  for (const [name, text] of Object.entries(files)) {
    const path = join(opts.out, name);
    const current = existsSync(path) ? readFileSync(path, 'utf8') : undefined;
    if (current === text) {
      out.write(`${path}: up to date\n`);
      continue;
    }
    if (opts.check) {
      stale += 1;
      out.write(`${path}: stale (run \`npx triad crds\`)\n`);
    } else {
      writeFileSync(path, text);
      out.write(`${path}: written\n`);
    }
  }
  return stale === 0 ? 0 : 1;
}
