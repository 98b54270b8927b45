import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { runCli } from '../cli';
import { TRIAD_VERSION } from '../version';

function capture(): { out: Writable; text: () => string } {
  const chunks: string[] = [];
  return {
    out: new Writable({
      write(c, _e, cb) {
        chunks.push(String(c));
        cb();
      },
    }),
    text: () => chunks.join(''),
  };
}

const misspelt = `apiVersion: networking.serving.volcano.sh/v1alpha1
kind: ModelServer
metadata: {name: qwen-vl, namespace: llm}
spec:
  inferenceEngine: vLLM
  pipelineMode: epd
  workloadPort: {port: 8000}
  ecConnecter: {type: shm}
  workloadSelector:
    matchLabels: {app: qwen-vl}
    pdGroup:
      groupKey: group
      encodeLabels: {role: encode}
      encodeLables: {role: encoder}
      prefillLabels: {role: prefill}
      decodeLabels: {role: decode}
`;

describe('triad validate', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'triad-validate-'));
    writeFileSync(join(dir, 'misspelt.yaml'), misspelt);
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('warns about fields the API server would drop, and passes without --strict', async () => {
    const c = capture();
    expect(await runCli(['validate', join(dir, 'misspelt.yaml')], c.out)).toBe(0);
    expect(c.text()).toContain('ModelServer llm/qwen-vl  valid, with warnings');
    const file = join(dir, 'misspelt.yaml');
    expect(c.text()).toContain(
      `    ${file}:14:7  warning: spec.workloadSelector.pdGroup.encodeLables: unknown field; the API server drops it (did you mean 'encodeLabels'?)`,
    );
    expect(c.text()).toContain(`    ${file}:8:3  warning: spec.ecConnecter: unknown field; the API server drops it`);
    expect(c.text()).toContain('all objects valid; 1 with warnings (--strict makes them errors)');
  });

  it("gives each problem its own field's line and column, in any document of the file", async () => {
    const file = join(dir, 'invalid.yaml');
    writeFileSync(
      file,
      [
        'apiVersion: networking.serving.volcano.sh/v1alpha1', // 1
        'kind: ModelRoute',
        'metadata: {name: ok, namespace: llm}',
        'spec: {modelName: ok, rules: [{targetModels: [{modelServerName: a}]}]}',
        '---', // 5
        'apiVersion: networking.serving.volcano.sh/v1alpha1', // 6: the document's first line
        'kind: ModelRoute',
        'metadata:',
        '  name: weights',
        '  namespace: llm', // 10
        'spec:',
        '  modelName: weights',
        '  rules:',
        '    - targetModels:',
        '        - modelServerName: a', // 15
        '          weight: 200',
        '---',
        'apiVersion: networking.serving.volcano.sh/v1alpha1', // 18
        'kind: ModelServer', // 19
        'metadata: {name: no-port, namespace: llm}', // 20
        'spec:',
        '  inferenceEngine: vLLM',
        '  workloadSelector: {matchLabels: {app: x}}',
        '',
      ].join('\n'),
    );
    const c = capture();
    expect(await runCli(['validate', file], c.out)).toBe(1);
    // The document's first line names the object; each problem line points at the field itself.
    expect(c.text()).toContain(`${file}:6  ModelRoute llm/weights  INVALID\n    ${file}:16:11  spec.rules[0].targetModels[0].weight: `);
    // A required field left out points at the key of the mapping it belongs in (`spec:`).
    expect(c.text()).toMatch(new RegExp(`${file}:18  ModelServer llm/no-port  INVALID\n {4}${file}:21:1  spec.workloadPort: `));
  });

  it('fails on the same warnings with --strict', async () => {
    const c = capture();
    expect(await runCli(['validate', '--strict', join(dir, 'misspelt.yaml')], c.out)).toBe(1);
    expect(c.text()).toContain('ModelServer llm/qwen-vl  INVALID (--strict)');
    expect(c.text()).toContain('1 invalid object(s); 1 with warnings');
  });

  it.each([
    [['--version']],
    [['validate', '--version']],
    [['gateway', '--version']],
    [['pod-watcher', '--version']],
    [['webhook', '--version']],
    [['up', '--version']],
  ])('triad %j prints the version and starts nothing', async (argv) => {
    const c = capture();
    expect(await runCli(argv, c.out)).toBe(0);
    expect(c.text()).toBe(`${TRIAD_VERSION}\n`);
  });
});
