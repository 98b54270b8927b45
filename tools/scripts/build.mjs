#!/usr/bin/env node
// nx `build` target for every project (run from the project root).
// Apps with a src/main.ts are bundled into one CommonJS file (dist/<root>/main.cjs) so a container runs
// `node main.cjs` with no TypeScript tooling; libraries are transpiled file by file into dist/<root>.
import { build } from 'esbuild';
import { existsSync, readdirSync, statSync, rmSync } from 'node:fs';
import { join, relative, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const workspaceRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const projectRoot = process.cwd();
const outdir = join(workspaceRoot, 'dist', relative(workspaceRoot, projectRoot));
rmSync(outdir, { recursive: true, force: true });

function* tsFiles(dir) {
  for (const entry of readdirSync(dir)) {
    const full = join(dir, entry);
    if (entry === '__fixtures__') continue;
    if (statSync(full).isDirectory()) yield* tsFiles(full);
    else if (entry.endsWith('.ts') && !entry.endsWith('.test.ts') && !entry.endsWith('.d.ts')) yield full;
  }
}

const main = join(projectRoot, 'src', 'main.ts');
if (existsSync(main)) {
  await build({
    entryPoints: [main],
    outfile: join(outdir, 'main.cjs'),
    bundle: true,
    platform: 'node',
    target: 'node20',
    format: 'cjs',
    sourcemap: true,
    // Native addons and packages that locate files at run time stay external and come from node_modules.
    external: ['@node-rs/*', 'tsx', 'esbuild'],
    logLevel: 'warning',
  });
} else {
  const src = join(projectRoot, 'src');
  const entryPoints = existsSync(src) ? [...tsFiles(src)] : [];
  if (entryPoints.length > 0) {
    await build({ entryPoints, outdir, outbase: src, platform: 'node', target: 'node20', format: 'cjs', logLevel: 'warning' });
  }
}
process.stdout.write(`built ${relative(workspaceRoot, outdir)}\n`);
