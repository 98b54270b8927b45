#!/usr/bin/env node
// `npm test`: lint (ESLint with type-aware rules and the module-boundary rules), the format check (Prettier), type-check, then every project's jest tests in one jest run.
// Ends with a plain `N passed, N failed` line (checks count as tests) and exits non-zero when anything failed.
// It starts by checking the servers and tools the tests run (prerequisites.mjs).
import { spawnSync } from 'node:child_process';
import { readFileSync, mkdirSync, rmSync } from 'node:fs';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { missingPrerequisites, renderMissing } from './prerequisites.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const bin = (name) => join(root, 'node_modules', '.bin', name);
// `--tests-only`: the jest projects without the static checks, whose results do not depend on the Node line
// (.ci/run runs the checks once, on the supported LTS, and the tests on each line). Other arguments go to jest.
const testsOnly = process.argv.includes('--tests-only');
const extraArgs = process.argv.slice(2).filter((a) => a !== '--tests-only');
let passed = 0;
let failed = 0;
const failures = [];

/** A check that has not finished in this long is stuck, not slow (each takes 1–2 minutes on a loaded 2-core machine). */
const CHECK_TIMEOUT_MS = 8 * 60_000;

function check(label, cmd, args) {
  const started = Date.now();
  let r = spawnSync(cmd, args, { cwd: root, stdio: 'inherit', timeout: CHECK_TIMEOUT_MS, killSignal: 'SIGKILL' });
  if (r.error?.code === 'ETIMEDOUT') {
    // Seen once: ESLint idle in its event loop with 1 s of CPU used after 8 minutes. Say so and try once more,
    // so a stuck tool shows up in the log instead of eating CI's time limit.
    process.stdout.write(`! ${label}: no result after ${CHECK_TIMEOUT_MS / 60_000} min; killed, running it once more\n`);
    r = spawnSync(cmd, args, { cwd: root, stdio: 'inherit', timeout: CHECK_TIMEOUT_MS, killSignal: 'SIGKILL' });
  }
  const secs = ((Date.now() - started) / 1000).toFixed(1);
  if (r.status === 0) {
    passed += 1;
    process.stdout.write(`✓ ${label} (${secs} s)\n`);
  } else {
    failed += 1;
    failures.push(label);
    process.stdout.write(`✗ ${label} failed (${secs} s)\n`);
  }
}

// The servers and tools the tests run, checked once: a missing one is a single list with its install command.
const missing = missingPrerequisites();
if (missing.length > 0) {
  process.stdout.write(renderMissing(missing));
  if (extraArgs.length === 0) {
    process.stdout.write('0 passed, 1 failed\n');
    process.exit(1);
  }
  process.stdout.write('(running the tests named on the command line anyway: they may not need these)\n');
}

if (extraArgs.length === 0 && !testsOnly) {
  check('lint: ESLint (typescript-eslint with type-aware rules, module boundaries)', process.execPath, [
    join(root, 'tools/lint/bin/lint.mjs'),
    '--all',
  ]);
  check('format: Prettier (TypeScript, JavaScript, JSON)', process.execPath, [
    join(root, 'node_modules/prettier/bin/prettier.cjs'),
    '--check',
    '--log-level',
    'warn',
    '.',
  ]);
  check('lint: declared dependencies = imported packages', process.execPath, [join(root, 'tools/lint/bin/deps.mjs')]);
  check('typecheck: tsc over the workspace', process.execPath, [
    join(root, 'node_modules/typescript/bin/tsc'),
    '-p',
    join(root, 'tsconfig.json'),
  ]);
}

const resultsDir = join(root, '.test-results');
rmSync(resultsDir, { recursive: true, force: true });
mkdirSync(resultsDir, { recursive: true });
const resultsFile = join(resultsDir, 'jest.json');
const jest = spawnSync(bin('jest'), ['--json', `--outputFile=${resultsFile}`, ...extraArgs], { cwd: root, stdio: 'inherit' });
try {
  const results = JSON.parse(readFileSync(resultsFile, 'utf8'));
  passed += results.numPassedTests;
  failed += results.numFailedTests + results.numRuntimeErrorTestSuites;
  for (const suite of results.testResults) {
    if (suite.status === 'failed') failures.push(suite.name.replace(`${root}/`, ''));
  }
} catch {
  failed += 1;
  failures.push(`jest exited with ${jest.status ?? jest.signal} and wrote no results`);
}
if (jest.status !== 0 && failures.length === 0) {
  failed += 1;
  failures.push(`jest exited with ${jest.status}`);
}
if (failures.length > 0) process.stdout.write(`failed:\n  ${failures.join('\n  ')}\n`);
process.stdout.write(`${passed} passed, ${failed} failed\n`);
process.exit(failed > 0 ? 1 : 0);
