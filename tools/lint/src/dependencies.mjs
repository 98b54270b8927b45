// Declared dependencies = used dependencies. Each workspace project lists in `dependencies` the packages its
// source imports and in `devDependencies` those only its tests import, with the root's pinned version; the root
// package.json pins every external package once: `dependencies` for what shipped code (apps, libs) imports,
// `devDependencies` for tests, tools, the scripts under tools/scripts and the tooling named in dependency-rules.mjs.
// Imports are read with TypeScript's own pre-processor (static, dynamic, require, type-only; not strings).
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { builtinModules, createRequire } from 'node:module';
import { join, relative, sep } from 'node:path';
import { readWorkspace } from './workspace.mjs';

const require = createRequire(import.meta.url);
const ts = require('typescript');

const SOURCE_EXT = /\.(ts|mts|cts|mjs|cjs|js)$/;
const SKIP_DIRS = new Set(['node_modules', 'dist', '__fixtures__', 'coverage']);
const builtins = new Set(builtinModules);
/** Project types whose `dependencies` are development tooling (tests helpers, benchmarks, checks). */
const DEV_TYPES = new Set(['type:tool', 'type:testing']);

function* sourceFiles(dir) {
  if (!existsSync(dir)) return;
  for (const entry of readdirSync(dir)) {
    if (SKIP_DIRS.has(entry)) continue;
    const full = join(dir, entry);
    if (statSync(full).isDirectory()) yield* sourceFiles(full);
    else if (SOURCE_EXT.test(entry) && !entry.endsWith('.d.ts')) yield full;
  }
}

/** The package a bare specifier names (`@scope/name/sub` → `@scope/name`), or undefined for relative and built-in ones. */
export function packageOf(specifier) {
  if (specifier.startsWith('.') || specifier.startsWith('/') || specifier.startsWith('node:')) return undefined;
  const parts = specifier.split('/');
  const name = specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
  return builtins.has(name) ? undefined : name;
}

/** Every package a file imports (static, dynamic, require, re-export, type-only). */
export function importedPackages(text) {
  const names = new Set();
  for (const f of ts.preProcessFile(text, true, true).importedFiles) {
    const name = packageOf(f.fileName);
    if (name) names.add(name);
  }
  return names;
}

const isTestFile = (projectRoot, file) => /\.test\.[cm]?[jt]s$/.test(file) || relative(projectRoot, file).split(sep)[0] === 'test';

/** The packages a project's source (src, bin) and tests import, each with the first file that does. */
export function projectImports(project) {
  const source = new Map();
  const tests = new Map();
  for (const dir of ['src', 'test', 'bin']) {
    for (const file of sourceFiles(join(project.root, dir))) {
      const into = isTestFile(project.root, file) ? tests : source;
      for (const name of importedPackages(readFileSync(file, 'utf8'))) if (name !== project.name && !into.has(name)) into.set(name, file);
    }
  }
  for (const name of source.keys()) tests.delete(name);
  return { source, tests };
}

const readJson = (path) => JSON.parse(readFileSync(path, 'utf8'));

/**
 * Checks the workspace at `workspaceRoot`. `rules.tooling` names root devDependencies used as commands or by
 * configuration rather than imported: `{ name: { file, token } }` (the file must mention the token) or
 * `{ name: { peerOf } }` (a peer dependency of that package). `rules.rootScripts` lists directories of root-level
 * scripts whose imports count as root devDependencies. Returns violations as `{ file, message }`.
 */
export function checkDependencies(workspaceRoot, rules) {
  const violations = [];
  const report = (file, message) => violations.push({ file, message });
  const rootPkgPath = join(workspaceRoot, 'package.json');
  const rootPkg = readJson(rootPkgPath);
  const pinned = { ...(rootPkg.devDependencies ?? {}), ...(rootPkg.dependencies ?? {}) };
  const projects = readWorkspace(workspaceRoot);
  const shippedExternals = new Set();
  const devExternals = new Set();

  for (const project of projects.values()) {
    const pkgPath = join(project.root, 'package.json');
    const pkg = readJson(pkgPath);
    const deps = pkg.dependencies ?? {};
    const devDeps = pkg.devDependencies ?? {};
    const { source, tests } = projectImports(project);
    const at = relative(workspaceRoot, pkgPath);
    const where = (file) => relative(workspaceRoot, file);
    for (const [name, file] of source) {
      if (!(name in deps)) report(at, `${name} is imported by ${where(file)} but not listed in dependencies`);
    }
    for (const [name, file] of tests) {
      if (name in devDeps || name in deps) continue;
      report(at, `${name} is imported by the test ${where(file)} but not listed in devDependencies`);
    }
    for (const name of Object.keys(deps)) {
      if (source.has(name)) continue;
      if (tests.has(name)) report(at, `${name} is only imported by tests: move it to devDependencies`);
      else report(at, `${name} is listed in dependencies but nothing imports it`);
    }
    for (const name of Object.keys(devDeps)) {
      if (!tests.has(name) && !source.has(name)) report(at, `${name} is listed in devDependencies but nothing imports it`);
    }
    const dev = DEV_TYPES.has(project.tags.find((t) => t.startsWith('type:')));
    for (const [name, version] of [...Object.entries(deps), ...Object.entries(devDeps)]) {
      if (projects.has(name)) continue;
      if (pinned[name] === undefined) report(at, `${name} is not pinned in the root package.json`);
      else if (version !== pinned[name]) report(at, `${name} ${version} differs from the root's ${pinned[name]}`);
      (dev || !(name in deps) ? devExternals : shippedExternals).add(name);
    }
  }

  // Root-level scripts and configuration.
  for (const dir of rules.rootScripts ?? []) {
    for (const file of sourceFiles(join(workspaceRoot, dir))) {
      for (const name of importedPackages(readFileSync(file, 'utf8'))) if (!projects.has(name)) devExternals.add(name);
    }
  }
  for (const [name, use] of Object.entries(rules.tooling ?? {})) {
    if (use.peerOf !== undefined) {
      const peer = join(workspaceRoot, 'node_modules', use.peerOf, 'package.json');
      const declared = existsSync(peer) && name in (readJson(peer).peerDependencies ?? {});
      if (!declared) report('package.json', `${name} is kept as a peer of ${use.peerOf}, which does not declare it`);
    } else if (!existsSync(join(workspaceRoot, use.file)) || !readFileSync(join(workspaceRoot, use.file), 'utf8').includes(use.token)) {
      report('package.json', `${name} is kept for ${use.file}, which does not mention ${use.token}`);
    }
    devExternals.add(name);
  }
  for (const name of shippedExternals) devExternals.delete(name);

  const rootDeps = rootPkg.dependencies ?? {};
  const rootDev = rootPkg.devDependencies ?? {};
  const root = (message) => report('package.json', message);
  for (const name of shippedExternals) {
    if (!(name in rootDeps)) root(`${name} is a dependency of shipped code (apps, libs): list it in dependencies`);
  }
  for (const name of devExternals) {
    if (!(name in rootDev)) root(`${name} is used only by tests, tools or scripts: list it in devDependencies`);
  }
  for (const name of Object.keys(rootDeps)) {
    if (!shippedExternals.has(name)) root(`${name} is listed in dependencies but no app or lib depends on it`);
  }
  for (const name of Object.keys(rootDev)) {
    if (!devExternals.has(name)) root(`${name} is listed in devDependencies but nothing uses it`);
  }
  return violations;
}

export function formatDependencyViolations(violations) {
  return violations.map((v) => `${v.file}  ${v.message}`).join('\n');
}
