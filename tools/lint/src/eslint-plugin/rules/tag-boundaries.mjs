// A project imports only the project types its own `type:*` tag allows (policy.allowedDependencyTypes).
import { allowedDependencyTypes } from '../policy.mjs';
import { moduleSpecifierVisitors } from '../imports.mjs';
import { locate, packageNameOf, typeTag } from '../../workspace.mjs';

export default {
  meta: {
    type: 'problem',
    docs: { description: 'enforce the dependency rules between project types (nx `type:*` tags)' },
    schema: [],
    messages: {
      untagged: 'project {{project}} has no known type:* tag in package.json nx.tags',
      boundary: 'a {{type}} project ({{project}}) may not import a {{targetType}} project ({{target}})',
    },
  },
  create(context) {
    const where = locate(context.filename);
    if (where && !allowedDependencyTypes[where.type]) {
      return { Program: (node) => context.report({ node, messageId: 'untagged', data: { project: where.project.name } }) };
    }
    return moduleSpecifierVisitors(context, (specifier, node, { projects, project, type }) => {
      const name = packageNameOf(specifier);
      const target = projects.get(name);
      if (!target || target.name === project.name) return;
      const entry = specifier === name ? '.' : `.${specifier.slice(name.length)}`;
      const targetType = target.entryTypes[entry] ?? typeTag(target);
      if (targetType === 'type:testing') return; // rules/testing-in-tests decides those
      if (!allowedDependencyTypes[type].includes(targetType)) {
        context.report({ node, messageId: 'boundary', data: { type, project: project.name, targetType, target: name } });
      }
    });
  },
};
