import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { missingPrerequisites, renderMissing } from '../prerequisites.mjs';

// The check `npm test` runs first: real programs, or small scripts standing in for a program's version output.

const root = resolve(__dirname, '../../..');
const dir = mkdtempSync(join(tmpdir(), 'triad-prereq-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** An executable that prints `text` and exits 0, as `<program> --version` does. */
function fakeProgram(name, text) {
  const path = join(dir, name);
  writeFileSync(path, `#!/bin/sh\necho '${text}'\n`);
  chmodSync(path, 0o755);
  return path;
}

describe('npm test prerequisites', () => {
  it('names a variable that points at a missing file, for every program it configures', () => {
    const env = {
      ...process.env,
      NATS_SERVER_BIN: join(dir, 'no-nats-server'),
      PROMETHEUS_BIN: join(dir, 'no-prometheus'),
      PROMTOOL_BIN: join(dir, 'no-promtool'),
    };
    const missing = missingPrerequisites(env);
    const byName = Object.fromEntries(missing.map((m) => [m.name, m.problem]));
    expect(byName['nats-server 2.9+']).toBe(`NATS_SERVER_BIN=${join(dir, 'no-nats-server')}: no such file`);
    expect(byName['prometheus 2.42+']).toBe(`PROMETHEUS_BIN=${join(dir, 'no-prometheus')}: no such file`);
    expect(byName['promtool 2.42+']).toBe(`PROMTOOL_BIN=${join(dir, 'no-promtool')}: no such file`);
    const report = renderMissing(missing);
    // One install command for the Debian packages, each package once (prometheus brings promtool).
    expect(report.match(/apt-get install/g)).toHaveLength(1);
    expect(report).toMatch(/apt-get install -y --no-install-recommends nats-server prometheus( |$)/m);
    expect(report).toContain('sudo systemctl disable --now prometheus');
    expect(report).toContain('or fix or unset the variables named above');
  });

  it('reads versions and refuses ones that are too old', () => {
    const env = {
      ...process.env,
      NATS_SERVER_BIN: fakeProgram('old-nats', 'nats-server: v2.8.4'),
      PROMETHEUS_BIN: fakeProgram('new-prometheus', 'prometheus, version 2.53.1 (branch: x)'),
      PROMTOOL_BIN: fakeProgram('old-promtool', 'promtool, version 2.41.9+ds (branch: x)'),
    };
    const byName = Object.fromEntries(missingPrerequisites(env).map((m) => [m.name, m.problem]));
    expect(byName['nats-server 2.9+']).toBe('2.8.4 is too old');
    expect(byName['promtool 2.42+']).toBe('2.41.9 is too old');
    expect(byName['prometheus 2.42+']).toBeUndefined();
  });

  it('npm test stops before running anything, with the list and a summary line, when one is missing', () => {
    const r = spawnSync(process.execPath, [join(root, 'tools/scripts/run-tests.mjs')], {
      cwd: root,
      encoding: 'utf8',
      env: { ...process.env, PROMTOOL_BIN: join(dir, 'missing-promtool') },
      timeout: 120_000,
    });
    expect(r.status).toBe(1);
    expect(r.stdout).toContain(`  - promtool 2.42+: PROMTOOL_BIN=${join(dir, 'missing-promtool')}: no such file.`);
    expect(r.stdout).not.toContain('lint: ESLint');
    expect(r.stdout.trimEnd().split('\n').at(-1)).toBe('0 passed, 1 failed');
  });
});
