import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { renderCrdFiles, buildCrds } from './crd-generator';

const crdDir = join(__dirname, '../../../infra/crds');

describe('CRD generator', () => {
  it('the committed infra/crds YAML matches the zod schemas (run `npx triad crds` when this fails)', () => {
    const expected = renderCrdFiles();
    const committed = Object.fromEntries(
      readdirSync(crdDir)
        .filter((f) => f.endsWith('.yaml'))
        .map((f) => [f, readFileSync(join(crdDir, f), 'utf8')]),
    );
    expect(Object.keys(committed).sort()).toEqual(Object.keys(expected).sort());
    for (const [file, text] of Object.entries(expected)) expect({ file, text: committed[file] }).toEqual({ file, text });
  });

  it('produces structural apiextensions v1 CRDs with status subresource and printer columns', () => {
    for (const crd of buildCrds()) {
      const doc = parse(JSON.stringify(crd));
      expect(doc.apiVersion).toBe('apiextensions.k8s.io/v1');
      const version = doc.spec.versions[0];
      expect(version.subresources).toEqual({ status: {} });
      expect(version.additionalPrinterColumns.length).toBeGreaterThan(1);
      const text = JSON.stringify(version.schema);
      expect(text).not.toContain('"$schema"');
      expect(text).not.toContain('"additionalProperties":false');
      expect(text).not.toContain('"const"');
      expect(text).not.toContain('propertyNames');
    }
  });

  it('carries the EPD fields and Kthena defaults', () => {
    const [ms, mr] = JSON.parse(JSON.stringify(buildCrds()));
    const spec = ms.spec.versions[0].schema.openAPIV3Schema.properties.spec;
    expect(spec.properties.pipelineMode.enum).toEqual(['aggregated', 'pd', 'epd', 'pd-disaggregated', 'vllm-epd', 'sglang-epd']);
    expect(Object.keys(spec.properties.workloadSelector.properties.pdGroup.properties)).toEqual([
      'groupKey',
      'encodeLabels',
      'prefillLabels',
      'decodeLabels',
    ]);
    expect(spec.required).toEqual(['inferenceEngine', 'workloadSelector', 'workloadPort']);
    const target = mr.spec.versions[0].schema.openAPIV3Schema.properties.spec.properties.rules.items.properties.targetModels.items;
    expect(target.properties.weight.default).toBe(100);
  });
});
