// The packages a bundle leaves external (native addons), copied with what they need at run time, so that a
// directory holding only the bundle and this node_modules runs anywhere the same Node runs: what the container
// image ships instead of a full `npm ci --omit=dev`.
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, readFileSync, readdirSync, rmSync, rmdirSync, statSync } from 'node:fs';
import { basename, dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Node's `process.platform` values, as prebuilt addons name their directories. */
const PLATFORMS = new Set(['aix', 'android', 'darwin', 'freebsd', 'linux', 'openbsd', 'sunos', 'win32']);

/** The installed directory of `name` as seen from `fromDir` (Node's lookup: node_modules of each parent). */
function packageDir(name, fromDir) {
  for (let dir = fromDir; ; dir = dirname(dir)) {
    const candidate = join(dir, 'node_modules', name);
    if (existsSync(join(candidate, 'package.json'))) return candidate;
    if (dirname(dir) === dir) return undefined;
  }
}

/** Bare package names (`@scope/name` or `name`) among the bundle's external imports that match `patterns`. */
export function externalPackages(metafile, patterns) {
  const matches = (name) => patterns.some((p) => (p.endsWith('/*') ? name.startsWith(p.slice(0, -1)) : name === p));
  const names = new Set();
  for (const input of Object.values(metafile.inputs)) {
    for (const imp of input.imports ?? []) {
      if (!imp.external || imp.path.startsWith('node:') || imp.path.startsWith('.')) continue;
      const parts = imp.path.split('/');
      const name = imp.path.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
      if (matches(name)) names.add(name);
    }
  }
  return [...names].sort();
}

/**
 * Copies `names` and, recursively, their dependencies and the optional dependencies installed here (a native
 * addon's build for this platform) from the workspace's node_modules into `outDir/node_modules`, flat. Returns the
 * copied packages with their versions; throws when a required dependency is missing or two versions would clash.
 */
export function copyRuntimePackages(names, workspaceRoot, outDir) {
  const copied = new Map();
  const visit = (name, fromDir, optional) => {
    const dir = packageDir(name, fromDir);
    if (dir === undefined) {
      if (optional) return;
      throw new Error(`runtime package ${name} is not installed (needed from ${relative(workspaceRoot, fromDir) || '.'})`);
    }
    const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
    const seen = copied.get(name);
    if (seen !== undefined) {
      if (seen !== pkg.version) {
        throw new Error(`runtime package ${name} is needed at ${seen} and ${pkg.version}; a flat node_modules cannot hold both`);
      }
      return;
    }
    copied.set(name, pkg.version);
    // A package's own files, without nested node_modules and without the prebuilt addons of other platforms
    // (zeromq ships build/<os>/<arch>/… for every target it supports; the image runs on this one).
    const ownFiles = (src) => {
      const parts = relative(dir, src).split('/');
      if (parts.includes('node_modules')) return false;
      if (parts[0] !== 'build' || !PLATFORMS.has(parts[1])) return true;
      return parts[1] === process.platform && (parts.length < 3 || parts[2] === process.arch);
    };
    cpSync(dir, join(outDir, 'node_modules', name), { recursive: true, filter: ownFiles });
    for (const dep of Object.keys(pkg.dependencies ?? {})) visit(dep, dir, false);
    for (const dep of Object.keys(pkg.optionalDependencies ?? {})) visit(dep, dir, true);
  };
  for (const name of names) visit(name, workspaceRoot, false);
  return copied;
}

const PROBE = join(dirname(fileURLToPath(import.meta.url)), 'runtime-probe.cjs');

/** The files below `dir/node_modules` that loading `names` from `dir` reads, with this Node; throws when a load fails. */
export function loadedFiles(dir, names) {
  const r = spawnSync(process.execPath, [PROBE, dir, ...names], { encoding: 'utf8', env: { PATH: process.env.PATH ?? '' } });
  if (r.status !== 0 || r.stderr !== '') throw new Error(`loading ${names.join(', ')} from ${dir} failed:\n${r.stderr}`);
  return new Set(JSON.parse(r.stdout));
}

/** Files a package keeps whether loaded or not: its manifest (module resolution reads it) and its licence texts. */
const ALWAYS_KEPT = /^(package\.json|(licen[cs]e|notice|copying)([._-].*)?)$/i;

function* filesBelow(dir) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = join(dir, entry.name);
    if (entry.isDirectory()) yield* filesBelow(full);
    else yield full;
  }
}

function removeEmptyDirs(dir) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) if (entry.isDirectory()) removeEmptyDirs(join(dir, entry.name));
  if (readdirSync(dir).length === 0) rmdirSync(dir);
}

/**
 * Ships only what the runtime loads: loads `names` from `outDir` in a child process of this Node (the image's, in
 * its build stage), keeps the files it read plus each package's package.json and licence, deletes the rest (the
 * prebuilt addons for other Node ABIs and libcs, zeromq's C++ sources and build scripts, cmake-ts' builder, source
 * maps, type declarations) and packages of which nothing was read (node-addon-api: headers for building). Loads
 * them again from what is left, which must work with no warning. Returns the packages removed entirely.
 */
export function pruneToLoaded(outDir, names, packages) {
  const modules = join(outDir, 'node_modules');
  const loaded = loadedFiles(outDir, names);
  const removed = [];
  for (const name of packages) {
    const dir = join(modules, name);
    const files = [...filesBelow(dir)];
    if (!files.some((f) => loaded.has(f))) {
      rmSync(dir, { recursive: true, force: true });
      removed.push(name);
      continue;
    }
    for (const file of files) if (!loaded.has(file) && !(ALWAYS_KEPT.test(basename(file)) && dirname(file) === dir)) rmSync(file);
    removeEmptyDirs(dir);
  }
  for (const scope of readdirSync(modules).filter((e) => e.startsWith('@'))) removeEmptyDirs(join(modules, scope));
  loadedFiles(outDir, names);
  return removed;
}

/** Total size in bytes of the files below `path` (or of the file). */
export function sizeOf(path) {
  const st = statSync(path);
  if (!st.isDirectory()) return st.size;
  return readdirSync(path).reduce((sum, entry) => sum + sizeOf(join(path, entry)), 0);
}
