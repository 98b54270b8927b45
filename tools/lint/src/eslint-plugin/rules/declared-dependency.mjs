// A project lists every workspace project it imports in its package.json (external packages: tools/lint/bin/deps.mjs).
import { moduleSpecifierVisitors } from '../imports.mjs';
import { packageNameOf } from '../../workspace.mjs';

export default {
  meta: {
    type: 'problem',
    docs: { description: 'require workspace projects that a project imports to be declared in its package.json' },
    schema: [],
    messages: { undeclared: '{{project}} imports {{target}} but does not list it in package.json dependencies' },
  },
  create(context) {
    return moduleSpecifierVisitors(context, (specifier, node, { projects, project }) => {
      const name = packageNameOf(specifier);
      if (!projects.has(name) || name === project.name || project.deps.has(name)) return;
      context.report({ node, messageId: 'undeclared', data: { project: project.name, target: name } });
    });
  },
};
