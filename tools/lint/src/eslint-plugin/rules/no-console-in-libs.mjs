// Libraries log through the logger they are given (pino in services, silent in tests), never the global console.
import { noConsoleTypes } from '../policy.mjs';
import { locate } from '../../workspace.mjs';

export default {
  meta: {
    type: 'suggestion',
    docs: { description: 'forbid the global console in the source of libraries (domain, infra, util tags)' },
    schema: [],
    messages: { console: 'libraries log through the logger they are given, not console' },
  },
  create(context) {
    const where = locate(context.filename);
    if (!where || where.testFile || !noConsoleTypes.has(where.type)) return {};
    return {
      'Program:exit'(program) {
        const globalScope = context.sourceCode.getScope(program);
        const consoleVariable = globalScope.set.get('console');
        const references = consoleVariable
          ? consoleVariable.references
          : globalScope.through.filter((r) => r.identifier.name === 'console');
        for (const ref of references) context.report({ node: ref.identifier, messageId: 'console' });
      },
    };
  },
};
