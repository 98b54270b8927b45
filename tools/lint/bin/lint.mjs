#!/usr/bin/env node
// Runs ESLint (eslint.config.mjs: typescript-eslint plus the module-boundary rules of tools/lint/src/eslint-plugin).
// Usage: `--all` lints the whole workspace; from a project root (the nx `lint` target) lints that project;
// other arguments are files or directories to lint. `--fix` applies ESLint's fixes.
import { resolve, dirname, join } from 'node:path';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';

// Seen once at the start of `npm test`: ESLint idle for 8 minutes (epoll wait, no timers, 1 s of CPU), cause not
// found. Should it happen again, leave evidence before the runner kills it: what the event loop waits for and a
// Node diagnostic report (JS stack, libuv handles). Linting carries on; the timer does not keep the process alive.
const STUCK_AFTER_MS = 5 * 60_000;
setTimeout(() => {
  const report = process.report.writeReport(join(tmpdir(), `triad-lint-stuck-${process.pid}.json`));
  process.stderr.write(
    `lint: no result after ${STUCK_AFTER_MS / 60_000} min; waiting on: ${process.getActiveResourcesInfo().join(', ')}; report: ${report}\n`,
  );
}, STUCK_AFTER_MS).unref();

const workspaceRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const args = process.argv.slice(2);
const fix = args.includes('--fix');
const paths = args.filter((a) => !a.startsWith('--')).map((p) => resolve(p));
const targets = args.includes('--all') ? [workspaceRoot] : paths.length > 0 ? paths : [process.cwd()];
// A checkout whose node_modules predates ESLint (a worktree that merged main without `npm ci`) gets a clear hint.
const { ESLint } = await import('eslint').catch((err) => {
  process.stderr.write(`lint: cannot load ESLint (${err.message}); run \`npm ci\` to install the workspace's devDependencies\n`);
  process.exit(2);
});
// The type-aware rules need a TypeScript program. The config's default, the project service, builds one per project
// tsconfig: right for one project (the nx `lint` target runs from a project root). Over several projects those
// programs overlap (each holds its dependencies' sources) and over the whole workspace they exceed Node's default
// heap, so `--all` and explicit paths use the single program of the root tsconfig.json, which covers every .ts file
// with the same compiler options.
const oneProgram = {
  files: ['**/*.ts'],
  languageOptions: {
    parserOptions: { projectService: false, project: join(workspaceRoot, 'tsconfig.json'), tsconfigRootDir: workspaceRoot },
  },
};
const overrideConfig = args.includes('--all') || paths.length > 0 ? oneProgram : undefined;
const eslint = new ESLint({ cwd: workspaceRoot, fix, errorOnUnmatchedPattern: false, overrideConfig });
const results = await eslint.lintFiles(targets);
if (fix) await ESLint.outputFixes(results);
const problems = results.reduce((n, r) => n + r.errorCount + r.warningCount, 0);
if (problems > 0) {
  const formatter = await eslint.loadFormatter('stylish');
  process.stderr.write(await formatter.format(results));
  process.exit(1);
}
process.stdout.write(`lint: ${results.length} file(s) clean\n`);
