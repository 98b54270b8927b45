#!/usr/bin/env node
// Declared dependencies = used dependencies, for every project and the root package.json (src/dependencies.mjs).
// Usage: node tools/lint/bin/deps.mjs [--workspace DIR]   (the tests point it at a fixture with planted mistakes)
import { resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { checkDependencies, formatDependencyViolations } from '../src/dependencies.mjs';
import { rootScriptDirs, toolingDependencies } from '../src/dependency-rules.mjs';

const args = process.argv.slice(2);
const wsIndex = args.indexOf('--workspace');
const workspaceRoot = wsIndex >= 0 ? resolve(args[wsIndex + 1]) : resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const violations = checkDependencies(workspaceRoot, { tooling: toolingDependencies, rootScripts: rootScriptDirs });
if (violations.length > 0) {
  process.stderr.write(`${formatDependencyViolations(violations)}\n${violations.length} dependency violation(s)\n`);
  process.exit(1);
}
process.stdout.write('dependencies: every declared package is used and every used package is declared\n');
