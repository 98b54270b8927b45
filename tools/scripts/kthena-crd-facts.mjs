#!/usr/bin/env node
// Extracts the facts of Kthena's published CRDs that Triad's CRDs must keep (every field path with its type,
// default, enum and bounds, and every `required` list) into the JSON fixture the superset test reads:
//
//   node tools/scripts/kthena-crd-facts.mjs <dir with Kthena's networking CRD YAMLs> [source label] \
//     > libs/crd/src/__fixtures__/kthena-crd-facts.json
//
// The directory is `charts/kthena/charts/networking/crds` of a Kthena checkout. Only facts are written (no
// descriptions, no YAML text), so refreshing after a Kthena release is one command and a diff to review.
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';

const [dir, source = dir] = process.argv.slice(2);
if (!dir) {
  process.stderr.write('usage: kthena-crd-facts.mjs <kthena networking crds dir> [source label]\n');
  process.exit(2);
}

const BOUNDS = ['minimum', 'maximum', 'minLength', 'maxLength', 'minItems', 'maxItems', 'pattern', 'format'];

/** Kthena's `unit` carries its enum twice under allOf; the values allowed are their intersection. */
function enumOf(node) {
  if (Array.isArray(node.enum)) return node.enum;
  const lists = (node.allOf ?? []).map((n) => n.enum).filter(Array.isArray);
  if (lists.length === 0) return undefined;
  return lists.reduce((acc, l) => acc.filter((v) => l.includes(v)));
}

function walk(node, path, out) {
  const fact = { path, type: node.type };
  if (node.default !== undefined) fact.default = node.default;
  const values = enumOf(node);
  if (values) fact.enum = values;
  for (const b of BOUNDS) if (node[b] !== undefined) fact[b] = node[b];
  if (Array.isArray(node.required)) fact.required = [...node.required].sort();
  if (node['x-kubernetes-map-type']) fact.mapType = node['x-kubernetes-map-type'];
  out.push(fact);
  if (path === 'metadata') return;
  for (const [key, child] of Object.entries(node.properties ?? {})) walk(child, path ? `${path}.${key}` : key, out);
  if (node.items) walk(node.items, `${path}[]`, out);
  if (node.additionalProperties && typeof node.additionalProperties === 'object') walk(node.additionalProperties, `${path}{}`, out);
}

const crds = {};
for (const file of readdirSync(dir)
  .filter((f) => f.endsWith('.yaml'))
  .sort()) {
  const doc = parse(readFileSync(join(dir, file), 'utf8'));
  if (doc?.kind !== 'CustomResourceDefinition') continue;
  const version = doc.spec.versions.find((v) => v.storage) ?? doc.spec.versions[0];
  const fields = [];
  walk(version.schema.openAPIV3Schema, '', fields);
  crds[doc.spec.names.kind] = {
    name: doc.metadata.name,
    group: doc.spec.group,
    scope: doc.spec.scope,
    version: version.name,
    subresources: Object.keys(version.subresources ?? {}).sort(),
    fields,
  };
}
process.stdout.write(`${JSON.stringify({ source, crds }, null, 1)}\n`);
