// Another project is reached through its package.json `exports` only, never a path inside it.
import { moduleSpecifierVisitors } from '../imports.mjs';
import { packageNameOf } from '../../workspace.mjs';

export default {
  meta: {
    type: 'problem',
    docs: { description: 'import workspace projects through their package exports only' },
    schema: [],
    messages: { deepImport: "'{{specifier}}' reaches into {{target}}; import one of its package exports" },
  },
  create(context) {
    return moduleSpecifierVisitors(context, (specifier, node, { projects, project }) => {
      const name = packageNameOf(specifier);
      const target = projects.get(name);
      if (!target || target.name === project.name) return;
      const entry = specifier === name ? '.' : `.${specifier.slice(name.length)}`;
      if (!target.entries.has(entry)) context.report({ node, messageId: 'deepImport', data: { specifier, target: name } });
    });
  },
};
