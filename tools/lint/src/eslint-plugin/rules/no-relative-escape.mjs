// A relative import stays inside its project; code of another project is imported by package name.
import { dirname, resolve, sep } from 'node:path';
import { moduleSpecifierVisitors } from '../imports.mjs';

export default {
  meta: {
    type: 'problem',
    docs: { description: 'forbid relative imports that leave the project' },
    schema: [],
    messages: { relativeEscape: "relative import '{{specifier}}' leaves project {{project}}; import the package instead" },
  },
  create(context) {
    return moduleSpecifierVisitors(context, (specifier, node, { project }) => {
      if (!specifier.startsWith('.')) return;
      const target = resolve(dirname(context.filename), specifier);
      if (target !== project.root && !target.startsWith(project.root + sep)) {
        context.report({ node, messageId: 'relativeEscape', data: { specifier, project: project.name } });
      }
    });
  },
};
