import { join, resolve } from 'node:path';
import { spawnSync } from 'node:child_process';
import { checkDependencies, importedPackages, packageOf } from './dependencies.mjs';
import { rootScriptDirs, toolingDependencies } from './dependency-rules.mjs';

const fixtureRoot = join(__dirname, '__fixtures__', 'deps');
const repoRoot = resolve(__dirname, '../../..');

describe('declared dependencies = used dependencies', () => {
  it('reads imports, requires, dynamic and type-only imports, not strings or comments', () => {
    const text = [
      "import a from 'a';",
      "import type { B } from '@scope/b/deep';",
      "const c = require('c/sub');",
      "const d = await import('d');",
      "export { e } from 'node:fs';",
      "import f from './f';",
      "const g = `import x from 'g'`;",
      "// import h from 'h';",
      "import 'path';",
    ].join('\n');
    expect([...importedPackages(text)].sort()).toEqual(['@scope/b', 'a', 'c', 'd']);
    expect(packageOf('@scope/b/deep')).toBe('@scope/b');
    expect(packageOf('fs/promises')).toBeUndefined();
  });

  it('flags every planted mistake of the fixture workspace', () => {
    const rules = { tooling: { jest: { file: 'package.json', token: 'jest --ci' } } };
    const messages = checkDependencies(fixtureRoot, rules).map((v) => `${v.file}  ${v.message}`);
    expect(messages.sort()).toEqual(
      [
        'libs/core/package.json  only-in-tests is only imported by tests: move it to devDependencies',
        'libs/core/package.json  only-in-tests is not pinned in the root package.json',
        'libs/core/package.json  stale-dev is listed in devDependencies but nothing imports it',
        'libs/core/package.json  stale-dev is not pinned in the root package.json',
        'libs/core/package.json  test-helper is imported by the test libs/core/test/core.test.cjs but not listed in devDependencies',
        'libs/core/package.json  undeclared is imported by libs/core/src/index.ts but not listed in dependencies',
        'libs/core/package.json  unpinned is listed in dependencies but nothing imports it',
        'libs/core/package.json  unpinned is not pinned in the root package.json',
        "libs/core/package.json  used-lib 2.1.0 differs from the root's 2.0.0",
        'package.json  jest is kept for package.json, which does not mention jest --ci',
        'package.json  left-pad is listed in dependencies but no app or lib depends on it',
        'package.json  only-in-tests is a dependency of shipped code (apps, libs): list it in dependencies',
        'package.json  stale-dev is used only by tests, tools or scripts: list it in devDependencies',
        'package.json  unpinned is a dependency of shipped code (apps, libs): list it in dependencies',
        'package.json  used-in-test is listed in devDependencies but nothing uses it',
      ].sort(),
    );
  });

  it('the command exits 1 on the fixture and 0 on the real workspace', () => {
    const deps = join(repoRoot, 'tools/lint/bin/deps.mjs');
    const bad = spawnSync(process.execPath, [deps, '--workspace', fixtureRoot], { encoding: 'utf8' });
    expect(bad.status).toBe(1);
    expect(bad.stderr).toContain('dependency violation(s)');
    const good = spawnSync(process.execPath, [deps], { cwd: repoRoot, encoding: 'utf8' });
    expect(good.stderr).toBe('');
    expect(good.status).toBe(0);
  });

  it('the real workspace declares exactly what it uses', () => {
    expect(checkDependencies(repoRoot, { tooling: toolingDependencies, rootScripts: rootScriptDirs })).toEqual([]);
  });
});
