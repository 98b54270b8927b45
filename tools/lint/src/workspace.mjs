// The workspace's projects as the lint rules see them: name, root, nx tags, declared dependencies, package exports.
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';

/** Reads the workspace's projects (name, root, tags, declared deps) from the npm workspaces globs. */
export function readWorkspace(workspaceRoot) {
  const rootPkg = JSON.parse(readFileSync(join(workspaceRoot, 'package.json'), 'utf8'));
  const projects = new Map();
  for (const glob of rootPkg.workspaces ?? []) {
    const parent = join(workspaceRoot, glob.replace(/\/\*$/, ''));
    if (!existsSync(parent)) continue;
    for (const entry of readdirSync(parent)) {
      const pkgPath = join(parent, entry, 'package.json');
      if (!existsSync(pkgPath)) continue;
      const pkg = JSON.parse(readFileSync(pkgPath, 'utf8'));
      projects.set(pkg.name, {
        name: pkg.name,
        root: join(parent, entry),
        tags: pkg.nx?.tags ?? [],
        deps: new Set([...Object.keys(pkg.dependencies ?? {}), ...Object.keys(pkg.devDependencies ?? {})]),
        entries: new Set(Object.keys(pkg.exports ?? { '.': null })),
        entryTypes: pkg.triad?.entryTypes ?? {},
        // The directory of each typed entry's module (`./client` → src/client): the files under it are of that type.
        entryDirs: Object.entries(pkg.triad?.entryTypes ?? {})
          .filter(([sub]) => typeof pkg.exports?.[sub] === 'string')
          .map(([sub, type]) => ({ dir: dirname(join(parent, entry, pkg.exports[sub])), type })),
      });
    }
  }
  return projects;
}

/** The project's `type:*` tag. */
export const typeTag = (project) => project.tags.find((t) => t.startsWith('type:'));

/** Test code: `*.test.*` files and everything under a project's `test/` directory. */
export const isTestFile = (projectRoot, file) => /\.test\.[cm]?[jt]s$/.test(file) || relative(projectRoot, file).split(sep)[0] === 'test';

/** The package a bare specifier names (`@scope/name/sub` → `@scope/name`). */
export function packageNameOf(specifier) {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
}

const workspaceRootByDir = new Map();
const workspaces = new Map();

/** The nearest ancestor directory of `file` whose package.json declares npm workspaces, or undefined. */
export function findWorkspaceRoot(file) {
  const visited = [];
  let dir = dirname(file);
  let found;
  for (;;) {
    if (workspaceRootByDir.has(dir)) {
      found = workspaceRootByDir.get(dir);
      break;
    }
    visited.push(dir);
    const pkgPath = join(dir, 'package.json');
    if (existsSync(pkgPath) && JSON.parse(readFileSync(pkgPath, 'utf8')).workspaces) {
      found = dir;
      break;
    }
    const parent = dirname(dir);
    if (parent === dir) break;
    dir = parent;
  }
  for (const d of visited) workspaceRootByDir.set(d, found);
  return found;
}

/** The workspace's projects, read once per lint run. */
export function workspaceProjects(workspaceRoot) {
  if (!workspaces.has(workspaceRoot)) workspaces.set(workspaceRoot, readWorkspace(workspaceRoot));
  return workspaces.get(workspaceRoot);
}

/** Project source directories: the rules apply to these, not to config files at a project's root (jest.config.js). */
export const SOURCE_DIRS = ['src', 'test', 'bin'];

/**
 * Where a file sits: `{ projects, project, type, testFile }` when it is source of a workspace project
 * (under its src, test or bin), otherwise undefined.
 */
export function locate(file) {
  const workspaceRoot = findWorkspaceRoot(file);
  if (!workspaceRoot) return undefined;
  const projects = workspaceProjects(workspaceRoot);
  for (const project of projects.values()) {
    const rel = relative(project.root, file);
    if (rel.startsWith('..') || rel === file) continue;
    if (!SOURCE_DIRS.includes(rel.split(sep)[0])) return undefined;
    const entry = project.entryDirs.find(({ dir }) => !relative(dir, file).startsWith('..'));
    return { projects, project, type: entry?.type ?? typeTag(project), testFile: isTestFile(project.root, file) };
  }
  return undefined;
}
