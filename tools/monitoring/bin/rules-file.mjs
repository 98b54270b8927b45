#!/usr/bin/env node
// Prints the Prometheus rule file that infra/monitoring/prometheus-rules.yaml carries as its `spec`, for a
// Prometheus run without the Prometheus Operator (list the output under `rule_files`) or for promtool:
//   node tools/monitoring/bin/rules-file.mjs > triad.rules.yaml && promtool check rules triad.rules.yaml
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse, stringify } from 'yaml';

const manifest = join(dirname(fileURLToPath(import.meta.url)), '../../../infra/monitoring/prometheus-rules.yaml');
const doc = parse(readFileSync(manifest, 'utf8'));
if (doc?.kind !== 'PrometheusRule' || !Array.isArray(doc.spec?.groups)) {
  process.stderr.write(`${manifest} is not a PrometheusRule with spec.groups\n`);
  process.exit(1);
}
process.stdout.write(stringify(doc.spec));
