// Barrels list their exports by name, so a project's public surface is visible in one file and dead exports show.
import { locate } from '../../workspace.mjs';

export default {
  meta: {
    type: 'suggestion',
    docs: { description: 'forbid `export * from` in project source' },
    schema: [],
    messages: { exportAll: 'barrels list their exports explicitly; `export *` is not allowed' },
  },
  create(context) {
    const where = locate(context.filename);
    if (!where || where.testFile) return {};
    return {
      // `export * as ns from` names what it exports; `export * from` hides it.
      ExportAllDeclaration: (node) => node.exported === null && context.report({ node, messageId: 'exportAll' }),
    };
  },
};
