#!/usr/bin/env node
// nx `build` target for every project (run from the project root).
// Apps with a src/main.ts are bundled into one CommonJS file (dist/<root>/main.cjs) so a container runs
// `node main.cjs` with no TypeScript tooling. Beside it go the few packages the bundle leaves external (native
// addons) in dist/<root>/node_modules, and a package.json: that directory alone runs the app (the image copies
// it). Libraries are transpiled file by file into dist/<root>. TRIAD_DIST_DIR writes elsewhere than dist/ (tests).
import { build } from 'esbuild';
import { existsSync, readdirSync, readFileSync, statSync, rmSync, writeFileSync } from 'node:fs';
import { join, relative, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { copyRuntimePackages, externalPackages, pruneToLoaded, sizeOf } from './runtime-deps.mjs';

const workspaceRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const projectRoot = process.cwd();
const distRoot = process.env.TRIAD_DIST_DIR ? resolve(process.env.TRIAD_DIST_DIR) : join(workspaceRoot, 'dist');
const outdir = join(distRoot, relative(workspaceRoot, projectRoot));
rmSync(outdir, { recursive: true, force: true });

function* tsFiles(dir) {
  for (const entry of readdirSync(dir)) {
    const full = join(dir, entry);
    if (entry === '__fixtures__') continue;
    if (statSync(full).isDirectory()) yield* tsFiles(full);
    else if (entry.endsWith('.ts') && !entry.endsWith('.test.ts') && !entry.endsWith('.d.ts')) yield full;
  }
}

// Native addons cannot be bundled: they stay external and are shipped in node_modules next to the bundle.
// zeromq (libs/kv-events, `triad kv-indexer`) finds its addon relative to its own files, so it must stay a package.
const EXTERNAL = ['@node-rs/*', 'zeromq'];

const main = join(projectRoot, 'src', 'main.ts');
if (existsSync(main)) {
  const project = JSON.parse(readFileSync(join(projectRoot, 'package.json'), 'utf8'));
  const options = {
    bundle: true,
    platform: 'node',
    target: 'node20',
    format: 'cjs',
    sourcemap: true,
    // V8 keeps a script's source in memory for as long as the process runs, as one-byte (Latin-1) text unless a
    // single character needs more: then every byte of the 28 MB bundle took two. ASCII output (escapes for the rest),
    // no comments or indentation and short local names keep the source small and one byte per character (the
    // pod-watcher's 9.9 MB of source became 6.7 MB with short names: 3 MB less heap in every replica). Functions and
    // classes keep their names (`keepNames`: error names, logs), and the source map leads back to the TypeScript.
    charset: 'ascii',
    legalComments: 'none',
    minifyWhitespace: true,
    minifySyntax: true,
    minifyIdentifiers: true,
    keepNames: true,
    metafile: true,
    external: EXTERNAL,
    logLevel: 'warning',
  };
  // Packages bundled on their own (package.json "triad.serviceBundles": package -> file name): a process that
  // runs one service loads only that service's bundle, whose source V8 keeps for the life of the process (with
  // every service in one bundle, the scheduler started with 20 MB more, the gateway 7 MB more).
  const services = project.triad?.serviceBundles ?? {};
  const names = Object.keys(services);
  const serviceFiles = {
    name: 'service-bundles',
    setup(b) {
      // Returning nothing lets esbuild resolve (and bundle) every other package as usual.
      b.onResolve({ filter: /^@triad\// }, (args) =>
        services[args.path] === undefined ? undefined : { path: `./services/${services[args.path]}.cjs`, external: true },
      );
    },
  };
  const result = await build({ ...options, entryPoints: [main], outfile: join(outdir, 'main.cjs'), plugins: [serviceFiles] });
  const metafiles = [result.metafile];
  for (const name of names) {
    const service = await build({
      ...options,
      stdin: {
        contents: `module.exports = require(${JSON.stringify(name)});`,
        resolveDir: projectRoot,
        sourcefile: `${services[name]}.ts`,
      },
      outfile: join(outdir, 'services', `${services[name]}.cjs`),
    });
    metafiles.push(service.metafile);
  }
  // The native packages any of the bundles leaves external.
  const inputs = Object.assign({}, ...metafiles.map((m) => m.inputs));
  const external = externalPackages({ inputs }, EXTERNAL);
  const copied = copyRuntimePackages(external, workspaceRoot, outdir);
  if (copied.size > 0) for (const name of pruneToLoaded(outdir, external, [...copied.keys()])) copied.delete(name);
  const dependencies = Object.fromEntries([...copied].sort());
  const manifest = { name: project.name, version: project.version, private: true, main: 'main.cjs', dependencies };
  writeFileSync(join(outdir, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  const mb = (bytes) => `${(bytes / 1e6).toFixed(1)} MB`;
  const modules = existsSync(join(outdir, 'node_modules')) ? sizeOf(join(outdir, 'node_modules')) : 0;
  const packages = [...copied.keys()].join(', ') || 'none';
  const split = names.map((n) => `${services[n]} ${mb(sizeOf(join(outdir, 'services', `${services[n]}.cjs`)))}`).join(', ');
  process.stdout.write(
    `bundle ${mb(sizeOf(join(outdir, 'main.cjs')))}${split ? ` (services: ${split})` : ''}, node_modules ${mb(modules)} (${packages})\n`,
  );
} else {
  const src = join(projectRoot, 'src');
  const entryPoints = existsSync(src) ? [...tsFiles(src)] : [];
  if (entryPoints.length > 0) {
    await build({ entryPoints, outdir, outbase: src, platform: 'node', target: 'node20', format: 'cjs', logLevel: 'warning' });
  }
}
process.stdout.write(`built ${relative(workspaceRoot, outdir)}\n`);
