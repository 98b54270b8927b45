#!/usr/bin/env node
// Collects Kthena's example manifests of the kinds Triad reads, unchanged, into the fixture that
// libs/crd and the webhook tests validate:
//
//   node tools/scripts/kthena-examples.mjs <kthena checkout> <label> > libs/crd/src/__fixtures__/kthena-examples.yaml
//
// Sources: examples/kthena-router/*.yaml, examples/models/*/router.yaml, and the ExternalModelProvider examples
// of docs/proposal/kthena-router-third-party-model-api.md (the only ones Kthena publishes). Deployments and other
// kinds Triad does not read are left out; each document keeps its text and is preceded by its source path.
import { readFileSync, readdirSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';

const [root, label = root] = process.argv.slice(2);
if (!root) {
  process.stderr.write('usage: kthena-examples.mjs <kthena checkout> [source label]\n');
  process.exit(2);
}
const KINDS = new Set(['ModelServer', 'ModelRoute', 'ExternalModelProvider', 'Secret', 'Gateway', 'HTTPRoute', 'InferencePool']);

function documentsOf(text) {
  return parseAllDocuments(text).map((doc) => {
    const [start, , end] = doc.range;
    return { kind: doc.toJS()?.kind, text: text.slice(start, end).trim() };
  });
}

const sources = [];
const routerDir = join(root, 'examples/kthena-router');
for (const f of readdirSync(routerDir)
  .filter((n) => n.endsWith('.yaml'))
  .sort()) {
  sources.push([`examples/kthena-router/${f}`, readFileSync(join(routerDir, f), 'utf8')]);
}
const modelsDir = join(root, 'examples/models');
for (const m of readdirSync(modelsDir).sort()) {
  const path = join(modelsDir, m, 'router.yaml');
  if (existsSync(path)) sources.push([`examples/models/${m}/router.yaml`, readFileSync(path, 'utf8')]);
}
const proposal = 'docs/proposal/kthena-router-third-party-model-api.md';
const blocks = [...readFileSync(join(root, proposal), 'utf8').matchAll(/```yaml\n([\s\S]*?)```/g)].map((m) => m[1]);
for (const block of blocks.filter((b) => b.includes('kind: ExternalModelProvider'))) sources.push([proposal, block]);

const out = [
  `# Kthena's example manifests of the kinds Triad reads, unchanged (${label}; Apache-2.0, The Volcano Authors).`,
  '# Regenerate with tools/scripts/kthena-examples.mjs. Every document must validate with no problem and no warning.',
];
for (const [path, text] of sources) {
  for (const doc of documentsOf(text).filter((d) => KINDS.has(d.kind))) out.push('---', `# ${path}`, doc.text);
}
process.stdout.write(`${out.join('\n')}\n`);
