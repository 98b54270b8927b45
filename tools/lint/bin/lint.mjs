#!/usr/bin/env node
// Usage: from a project root (the nx `lint` target) checks that project; `--all` checks every project;
// `--workspace DIR` checks another workspace (the tests point it at a fixture with planted bad imports).
import { readFileSync } from 'node:fs';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { readWorkspace, checkProject, formatViolations } from '../src/boundaries.mjs';

const args = process.argv.slice(2);
const wsIndex = args.indexOf('--workspace');
const workspaceRoot = wsIndex >= 0 ? resolve(args[wsIndex + 1]) : resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const projects = readWorkspace(workspaceRoot);
const names = args.includes('--all')
  ? [...projects.keys()]
  : [JSON.parse(readFileSync(join(process.cwd(), 'package.json'), 'utf8')).name];
const unknown = names.filter((n) => !projects.has(n));
if (unknown.length > 0) {
  process.stderr.write(`lint: ${unknown.join(', ')} is not a project of ${workspaceRoot}\n`);
  process.exit(2);
}
const violations = names.flatMap((name) => checkProject(projects, name));
if (violations.length > 0) {
  process.stderr.write(`${formatViolations(workspaceRoot, violations)}\n${violations.length} lint violation(s)\n`);
  process.exit(1);
}
process.stdout.write(`lint: ${names.length} project(s) clean\n`);
