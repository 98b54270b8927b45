// `type:domain` libraries are pure: no network, disk, process or SDK modules outside their tests.
import { builtinModules } from 'node:module';
import { domainBannedExternals } from '../policy.mjs';
import { moduleSpecifierVisitors } from '../imports.mjs';
import { packageNameOf } from '../../workspace.mjs';

const builtins = new Set(builtinModules);

export default {
  meta: {
    type: 'problem',
    docs: { description: 'keep type:domain libraries free of network, disk and SDK modules' },
    schema: [],
    messages: { domainIo: "type:domain project {{project}} may not import I/O module '{{specifier}}'" },
  },
  create(context) {
    return moduleSpecifierVisitors(context, (specifier, node, { projects, project, type, testFile }) => {
      if (type !== 'type:domain' || testFile || specifier.startsWith('.')) return;
      const name = packageNameOf(specifier);
      if (projects.has(name)) return;
      const bare = specifier.startsWith('node:') ? specifier : builtins.has(name) ? name : specifier;
      if (domainBannedExternals.some((re) => re.test(bare) || re.test(name))) {
        context.report({ node, messageId: 'domainIo', data: { project: project.name, specifier } });
      }
    });
  },
};
