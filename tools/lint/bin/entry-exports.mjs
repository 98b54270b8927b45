#!/usr/bin/env node
// Counts, per library entry point, the exported names that code outside the library uses.
// Usage: `node tools/lint/bin/entry-exports.mjs [--list]`; --list names the unused exports of each entry.
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { entryExportUse } from '../src/entry-exports.mjs';

const workspaceRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const list = process.argv.includes('--list');
let exported = 0;
let unused = 0;
for (const e of entryExportUse(workspaceRoot)) {
  exported += e.exported.length;
  unused += e.unused.length;
  const name = e.entry === '.' ? e.lib : `${e.lib}${e.entry.slice(1)}`;
  process.stdout.write(
    `${name.padEnd(28)} ${String(e.exported.length - e.unused.length).padStart(4)} of ${String(e.exported.length).padStart(4)} used outside the lib\n`,
  );
  if (list && e.unused.length > 0) process.stdout.write(`  unused: ${e.unused.join(', ')}\n`);
}
process.stdout.write(`entry exports: ${exported - unused} of ${exported} used outside their lib, ${unused} unused\n`);
