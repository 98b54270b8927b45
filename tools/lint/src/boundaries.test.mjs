import { join, resolve } from 'node:path';
import { spawnSync } from 'node:child_process';
import { readWorkspace, checkProject, checkWorkspace, importSpecifiers } from './boundaries.mjs';

const fixtureRoot = join(__dirname, '__fixtures__', 'planted');
const repoRoot = resolve(__dirname, '../../..');

describe('module boundary checker', () => {
  const projects = readWorkspace(fixtureRoot);

  it('flags a domain lib importing an infra lib and a network module', () => {
    const rules = checkProject(projects, '@fx/model').map((v) => `${v.rule}:${v.line}`);
    expect(rules).toEqual(['boundary:2', 'domain-io:3']);
  });

  it('flags a lib importing an app, undeclared, and an export-all barrel', () => {
    const rules = checkProject(projects, '@fx/wire').map((v) => v.rule).sort();
    expect(rules).toEqual(['boundary', 'no-export-all', 'undeclared-dependency']);
  });

  it('flags relative imports that escape the project', () => {
    const rules = checkProject(projects, '@fx/app').map((v) => v.rule);
    expect(rules).toEqual(['relative-escape']);
  });

  it('finds static, type-only, side-effect, dynamic and require imports but not commented ones', () => {
    const text = `import a from 'a';\nimport type { B } from 'b';\nimport 'c';\nconst d = await import('d');\nconst e = ` +
      `require('e');\n// import f from 'f';\nexport { g } from 'g';`;
    expect(importSpecifiers(text).map((s) => s.specifier).sort()).toEqual(['a', 'b', 'c', 'd', 'e', 'g']);
  });

  it('the lint command exits 1 on the planted workspace and 0 on the real tree', () => {
    const lint = join(repoRoot, 'tools/lint/bin/lint.mjs');
    const bad = spawnSync(process.execPath, [lint, '--all', '--workspace', fixtureRoot], { encoding: 'utf8' });
    expect(bad.status).toBe(1);
    expect(bad.stderr).toContain("may not import a type:infra project (@fx/wire)");
    expect(bad.stderr).toContain('6 lint violation(s)');
    const good = spawnSync(process.execPath, [lint, '--all'], { cwd: repoRoot, encoding: 'utf8' });
    expect(good.stderr).toBe('');
    expect(good.status).toBe(0);
  });

  it('the real workspace has no boundary violations', () => {
    expect(checkWorkspace(repoRoot)).toEqual([]);
  });
});
