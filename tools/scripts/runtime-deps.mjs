// The packages a bundle leaves external (native addons), copied with what they need at run time, so that a
// directory holding only the bundle and this node_modules runs anywhere the same Node runs: what the container
// image ships instead of a full `npm ci --omit=dev`.
import { cpSync, existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';

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

/** Total size in bytes of the files below `path` (or of the file). */
export function sizeOf(path) {
  const st = statSync(path);
  if (!st.isDirectory()) return st.size;
  return readdirSync(path).reduce((sum, entry) => sum + sizeOf(join(path, entry)), 0);
}
