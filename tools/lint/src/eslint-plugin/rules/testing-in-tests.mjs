// `type:testing` libraries (nats-server launcher, fakes, sims harness) are for tests; only tools and other testing
// libraries may use them from their source.
import { mayUseTestingInSource } from '../policy.mjs';
import { moduleSpecifierVisitors } from '../imports.mjs';
import { packageNameOf, typeTag } from '../../workspace.mjs';

export default {
  meta: {
    type: 'problem',
    docs: { description: 'allow type:testing libraries only in tests, tools and other testing libraries' },
    schema: [],
    messages: { testingInSource: '{{target}} (type:testing) may only be imported from tests' },
  },
  create(context) {
    return moduleSpecifierVisitors(context, (specifier, node, { projects, project, type, testFile }) => {
      if (testFile || mayUseTestingInSource.has(type)) return;
      const name = packageNameOf(specifier);
      const target = projects.get(name);
      if (!target || target.name === project.name) return;
      const entry = specifier === name ? '.' : `.${specifier.slice(name.length)}`;
      if ((target.entryTypes[entry] ?? typeTag(target)) === 'type:testing') {
        context.report({ node, messageId: 'testingInSource', data: { target: name } });
      }
    });
  },
};
