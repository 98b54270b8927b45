// The `triad` ESLint plugin: module boundaries of the workspace from each project's package.json `nx.tags`
// (policy.mjs). Rules apply to a project's src, test and bin files; other files get no findings.
import declaredDependency from './rules/declared-dependency.mjs';
import domainNoIo from './rules/domain-no-io.mjs';
import noConsoleInLibs from './rules/no-console-in-libs.mjs';
import noDeepImport from './rules/no-deep-import.mjs';
import noExportAll from './rules/no-export-all.mjs';
import noRelativeEscape from './rules/no-relative-escape.mjs';
import tagBoundaries from './rules/tag-boundaries.mjs';
import testingInTests from './rules/testing-in-tests.mjs';

export const rules = {
  'tag-boundaries': tagBoundaries,
  'testing-in-tests': testingInTests,
  'domain-no-io': domainNoIo,
  'no-deep-import': noDeepImport,
  'no-relative-escape': noRelativeEscape,
  'declared-dependency': declaredDependency,
  'no-export-all': noExportAll,
  'no-console-in-libs': noConsoleInLibs,
};

const plugin = { meta: { name: 'triad', version: '0.1.0' }, rules };

/** Every rule of the plugin as an error, for `plugins: { triad }` configs. */
export const recommendedRules = Object.fromEntries(Object.keys(rules).map((name) => [`triad/${name}`, 'error']));

export default plugin;
