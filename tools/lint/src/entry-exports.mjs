// Which names each library's entry points export, and which of them code outside that library uses: a lib's
// surface should be what other packages need, not everything it has. Read with TypeScript's parser only (no type
// checking), so it runs in a second.
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import ts from 'typescript';
import { readWorkspace } from './workspace.mjs';

const SOURCE = /\.(ts|mts|cts|mjs|cjs|js)$/;
const SKIP_DIRS = new Set(['node_modules', 'dist', 'coverage', '__fixtures__', '.nx']);

function* sourceFiles(dir) {
  for (const name of readdirSync(dir)) {
    if (SKIP_DIRS.has(name) || name.startsWith('.')) continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) yield* sourceFiles(path);
    else if (SOURCE.test(name) && !name.endsWith('.d.ts')) yield path;
  }
}

const parse = (file) => ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);

/** Names a module exports (`export *` is refused by the lint, so every name is spelled out). */
function exportedNames(file) {
  const names = new Set();
  const hasExport = (node) => ts.getModifiers?.(node)?.some((m) => m.kind === ts.SyntaxKind.ExportKeyword);
  for (const stmt of parse(file).statements) {
    if (ts.isExportDeclaration(stmt) && stmt.exportClause && ts.isNamedExports(stmt.exportClause)) {
      for (const el of stmt.exportClause.elements) names.add(el.name.text);
    } else if (ts.isVariableStatement(stmt) && hasExport(stmt)) {
      for (const d of stmt.declarationList.declarations) if (ts.isIdentifier(d.name)) names.add(d.name.text);
    } else if (
      (ts.isFunctionDeclaration(stmt) ||
        ts.isClassDeclaration(stmt) ||
        ts.isInterfaceDeclaration(stmt) ||
        ts.isTypeAliasDeclaration(stmt) ||
        ts.isEnumDeclaration(stmt)) &&
      hasExport(stmt) &&
      stmt.name
    ) {
      names.add(stmt.name.text);
    }
  }
  return names;
}

/**
 * Records in `used` (specifier → names) what `file` takes from workspace packages: named imports and re-exports,
 * `import('x').Name` types, destructured `require('x')`, and `ns.name` / `T['name']` on a whole module bound to a
 * name (`import * as ns`, `const ns = require('x')`, `type T = typeof import('x')`).
 */
function collectUses(file, isWorkspaceSpecifier, used) {
  const sf = parse(file);
  const take = (spec, name) => {
    if (!used.has(spec)) used.set(spec, new Set());
    used.get(spec).add(name);
  };
  const wholeModule = new Map(); // local name → specifier
  const specOf = (node) => (node && ts.isStringLiteralLike(node) && isWorkspaceSpecifier(node.text) ? node.text : undefined);
  const requireSpec = (expr) => {
    while (expr && (ts.isAsExpression(expr) || ts.isParenthesizedExpression(expr) || ts.isSatisfiesExpression?.(expr)))
      expr = expr.expression;
    return expr && ts.isCallExpression(expr) && ts.isIdentifier(expr.expression) && expr.expression.text === 'require'
      ? specOf(expr.arguments[0])
      : undefined;
  };
  const visit = (node) => {
    if (ts.isImportDeclaration(node)) {
      const spec = specOf(node.moduleSpecifier);
      const bindings = node.importClause?.namedBindings;
      if (spec && bindings && ts.isNamedImports(bindings))
        for (const el of bindings.elements) take(spec, (el.propertyName ?? el.name).text);
      if (spec && bindings && ts.isNamespaceImport(bindings)) wholeModule.set(bindings.name.text, spec);
    } else if (ts.isExportDeclaration(node)) {
      const spec = specOf(node.moduleSpecifier);
      if (spec && node.exportClause && ts.isNamedExports(node.exportClause))
        for (const el of node.exportClause.elements) take(spec, (el.propertyName ?? el.name).text);
    } else if (ts.isImportTypeNode(node)) {
      const spec = ts.isLiteralTypeNode(node.argument) ? specOf(node.argument.literal) : undefined;
      if (spec && node.qualifier) take(spec, ts.isIdentifier(node.qualifier) ? node.qualifier.text : node.qualifier.left.getText());
    } else if (ts.isVariableDeclaration(node) && node.initializer) {
      const spec = requireSpec(node.initializer);
      if (spec && ts.isObjectBindingPattern(node.name)) {
        for (const el of node.name.elements) take(spec, (el.propertyName ?? el.name).getText());
      } else if (spec && ts.isIdentifier(node.name)) wholeModule.set(node.name.text, spec);
    } else if (ts.isTypeAliasDeclaration(node) && ts.isImportTypeNode(node.type) && node.type.isTypeOf) {
      const spec = ts.isLiteralTypeNode(node.type.argument) ? specOf(node.type.argument.literal) : undefined;
      if (spec && !node.type.qualifier) wholeModule.set(node.name.text, spec);
    } else if (ts.isPropertyAccessExpression(node) && ts.isIdentifier(node.expression) && wholeModule.has(node.expression.text)) {
      take(wholeModule.get(node.expression.text), node.name.text);
    } else if (
      ts.isIndexedAccessTypeNode(node) &&
      ts.isTypeReferenceNode(node.objectType) &&
      ts.isIdentifier(node.objectType.typeName) &&
      wholeModule.has(node.objectType.typeName.text) &&
      ts.isLiteralTypeNode(node.indexType) &&
      ts.isStringLiteral(node.indexType.literal)
    ) {
      take(wholeModule.get(node.objectType.typeName.text), node.indexType.literal.text);
    } else if (ts.isQualifiedName(node) && ts.isIdentifier(node.left) && wholeModule.has(node.left.text)) {
      take(wholeModule.get(node.left.text), node.right.text);
    }
    ts.forEachChild(node, visit);
  };
  // Two passes: a whole-module binding may be declared after its first use in the file.
  visit(sf);
  visit(sf);
}

/**
 * For every `libs/*` package: each entry point (`exports` of its package.json), the names it exports, and those
 * that code outside the package imports.
 */
export function entryExportUse(workspaceRoot) {
  const projects = [...readWorkspace(workspaceRoot).values()];
  const names = new Set(projects.map((p) => p.name));
  const isWorkspaceSpecifier = (s) => names.has(s.startsWith('@') ? s.split('/').slice(0, 2).join('/') : s);
  const usedBy = new Map(projects.map((p) => [p.name, new Map()]));
  for (const project of projects) {
    const used = new Map();
    for (const file of sourceFiles(project.root)) collectUses(file, isWorkspaceSpecifier, used);
    for (const [spec, taken] of used) {
      const pkg = spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0];
      if (pkg === project.name) continue;
      const entry = spec === pkg ? '.' : `.${spec.slice(pkg.length)}`;
      const byEntry = usedBy.get(pkg);
      if (!byEntry.has(entry)) byEntry.set(entry, new Set());
      for (const n of taken) byEntry.get(entry).add(n);
    }
  }
  const libs = [];
  for (const project of projects) {
    if (relative(workspaceRoot, project.root).split(sep)[0] !== 'libs') continue;
    const pkg = JSON.parse(readFileSync(join(project.root, 'package.json'), 'utf8'));
    for (const [entry, target] of Object.entries(pkg.exports ?? { '.': pkg.main })) {
      if (typeof target !== 'string') continue;
      const exported = [...exportedNames(join(project.root, target))].sort();
      const taken = usedBy.get(project.name).get(entry) ?? new Set();
      libs.push({
        lib: project.name,
        entry,
        file: relative(workspaceRoot, join(project.root, target)),
        exported,
        unused: exported.filter((n) => !taken.has(n)),
      });
    }
  }
  return libs;
}
