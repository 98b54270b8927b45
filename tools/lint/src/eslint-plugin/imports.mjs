// Visits every module specifier of a file: static imports (also type-only), side-effect imports, re-exports,
// dynamic import(), require(), `import x = require()` and `import('x').T` types.
import { locate } from '../workspace.mjs';

const literalString = (node) => (node?.type === 'Literal' && typeof node.value === 'string' ? node.value : undefined);

/**
 * ESLint visitors that call `check(specifier, node, where)` for each specifier of a project source file, where
 * `where` is what `locate` returns. Files outside any project's src/test/bin get no visitors.
 */
export function moduleSpecifierVisitors(context, check) {
  const where = locate(context.filename);
  if (!where) return {};
  const visit = (node, specifierNode) => {
    const specifier = literalString(specifierNode);
    if (specifier !== undefined) check(specifier, specifierNode, where);
  };
  return {
    ImportDeclaration: (node) => visit(node, node.source),
    ExportNamedDeclaration: (node) => node.source && visit(node, node.source),
    ExportAllDeclaration: (node) => visit(node, node.source),
    ImportExpression: (node) => visit(node, node.source),
    CallExpression: (node) => {
      if (node.callee.type === 'Identifier' && node.callee.name === 'require') visit(node, node.arguments[0]);
    },
    TSExternalModuleReference: (node) => visit(node, node.expression),
    TSImportType: (node) => visit(node, node.argument?.type === 'TSLiteralType' ? node.argument.literal : node.argument),
  };
}
