import { readFileSync, readdirSync, existsSync, statSync } from 'node:fs';
import { join, resolve, relative, dirname, sep } from 'node:path';
import { builtinModules } from 'node:module';
import {
  allowedDependencyTypes, mayUseTestingInSource, domainBannedExternals, noConsoleTypes,
} from './rules.mjs';

const SOURCE_EXT = /\.(ts|mts|cts|mjs|cjs|js)$/;
const SKIP_DIRS = new Set(['node_modules', 'dist', '__fixtures__', 'coverage']);
const builtins = new Set(builtinModules);

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
      });
    }
  }
  return projects;
}

function typeTag(project) {
  return project.tags.find((t) => t.startsWith('type:'));
}

function* sourceFiles(dir) {
  if (!existsSync(dir)) return;
  for (const entry of readdirSync(dir)) {
    if (SKIP_DIRS.has(entry)) continue;
    const full = join(dir, entry);
    if (statSync(full).isDirectory()) yield* sourceFiles(full);
    else if (SOURCE_EXT.test(entry) && !entry.endsWith('.d.ts')) yield full;
  }
}

/** Removes comments so commented-out imports do not count; keeps string contents intact enough for specifiers. */
function stripComments(text) {
  return text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|[^:'"`\\])\/\/.*$/gm, '$1');
}

/** Returns every module specifier the file imports, re-exports or requires, with its line number. */
export function importSpecifiers(text) {
  const code = stripComments(text);
  const found = [];
  const patterns = [
    /\b(?:import|export)\s+(?:type\s+)?[^'";]*?\bfrom\s*['"]([^'"]+)['"]/g,
    /\bimport\s*['"]([^'"]+)['"]/g,
    /\b(?:import|require)\s*\(\s*['"]([^'"]+)['"]\s*\)/g,
  ];
  for (const re of patterns) {
    for (const m of code.matchAll(re)) {
      const line = code.slice(0, m.index).split('\n').length;
      found.push({ specifier: m[1], line });
    }
  }
  return found;
}

function packageNameOf(specifier) {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
}

function isTestFile(projectRoot, file) {
  const rel = relative(projectRoot, file);
  return /\.test\.[cm]?[jt]s$/.test(file) || rel.startsWith(`test${sep}`) || rel.startsWith('test/');
}

/** Checks one project and returns its violations as `{file, line, rule, message}`. */
export function checkProject(projects, projectName) {
  const project = projects.get(projectName);
  const violations = [];
  const type = typeTag(project);
  const report = (file, line, rule, message) => violations.push({ file, line, rule, message });
  if (!type || !allowedDependencyTypes[type]) {
    report(join(project.root, 'package.json'), 1, 'tags', `project ${project.name} has no known type:* tag`);
    return violations;
  }
  const files = ['src', 'test', 'bin'].flatMap((d) => [...sourceFiles(join(project.root, d))]);
  for (const file of files) {
    const text = readFileSync(file, 'utf8');
    const testFile = isTestFile(project.root, file);
    if (!testFile && /^\s*export\s+\*\s+from/m.test(stripComments(text))) {
      report(file, 1, 'no-export-all', 'barrels list their exports explicitly; `export *` is not allowed');
    }
    if (!testFile && noConsoleTypes.has(type) && /\bconsole\.(log|info|warn|error|debug)\(/.test(stripComments(text))) {
      report(file, 1, 'no-console', 'libraries log through the logger they are given, not console');
    }
    for (const { specifier, line } of importSpecifiers(text)) {
      if (specifier.startsWith('.')) {
        const target = resolve(dirname(file), specifier);
        if (!target.startsWith(project.root + sep) && target !== project.root) {
          report(
            file, line, 'relative-escape', `relative import '${specifier}' leaves project ${project.name}; import the package instead`,
          );
        }
        continue;
      }
      const name = packageNameOf(specifier);
      const target = projects.get(name);
      if (target) {
        if (target.name === project.name) continue;
        const entry = specifier === name ? '.' : `.${specifier.slice(name.length)}`;
        if (!target.entries.has(entry)) {
          report(file, line, 'deep-import', `'${specifier}' reaches into ${name}; import one of its package exports`);
        }
        if (!project.deps.has(name)) {
          report(file, line, 'undeclared-dependency', `${project.name} imports ${name} but does not list it in package.json dependencies`);
        }
        const targetType = target.entryTypes[entry] ?? typeTag(target);
        const isTestingTarget = targetType === 'type:testing';
        if (isTestingTarget && !testFile && !mayUseTestingInSource.has(type)) {
          report(file, line, 'testing-in-source', `${name} (type:testing) may only be imported from tests`);
        } else if (!isTestingTarget && !allowedDependencyTypes[type].includes(targetType)) {
          report(file, line, 'boundary', `a ${type} project (${project.name}) may not import a ${targetType} project (${name})`);
        }
        continue;
      }
      if (type === 'type:domain' && !testFile) {
        const bare = specifier.startsWith('node:') ? specifier : builtins.has(name) ? name : specifier;
        if (domainBannedExternals.some((re) => re.test(bare) || re.test(name))) {
          report(file, line, 'domain-io', `type:domain project ${project.name} may not import I/O module '${specifier}'`);
        }
      }
    }
  }
  return violations;
}

/** Checks every project of the workspace. */
export function checkWorkspace(workspaceRoot) {
  const projects = readWorkspace(workspaceRoot);
  return [...projects.keys()].flatMap((name) => checkProject(projects, name));
}

export function formatViolations(workspaceRoot, violations) {
  return violations
    .map((v) => `${relative(workspaceRoot, v.file)}:${v.line}  ${v.rule}  ${v.message}`)
    .join('\n');
}
