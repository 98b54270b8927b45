import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { containerMemory, nodeHeapMbFor, quantityBytes } from './as-deployed';

describe('running a benchmarked service as deployed', () => {
  const dir = mkdtempSync(join(tmpdir(), 'triad-as-deployed-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('reads Kubernetes memory quantities', () => {
    expect(quantityBytes('512Mi')).toBe(512 * 1024 * 1024);
    expect(quantityBytes('1.5Gi')).toBe(1.5 * 1024 ** 3);
    expect(quantityBytes('1G')).toBe(1e9);
    expect(quantityBytes('1048576')).toBe(1048576);
    expect(() => quantityBytes('lots')).toThrow('not a memory quantity');
    expect(nodeHeapMbFor(quantityBytes('512Mi'))).toBe(256);
  });

  it("finds a container's memory limit and NODE_OPTIONS in a multi-document manifest", () => {
    const file = join(dir, 'd.yaml');
    writeFileSync(
      file,
      [
        'apiVersion: v1\nkind: Service\nmetadata: {name: x}',
        'apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: other}\nspec: {template: {spec: {containers: [{name: c, resources: {limits: {memory: 1Gi}}}]}}}',
        [
          'apiVersion: apps/v1',
          'kind: Deployment',
          'metadata: {name: w}',
          'spec:',
          '  template:',
          '    spec:',
          '      containers:',
          '        - name: sidecar',
          '          resources: {limits: {memory: 64Mi}}',
          '        - name: c',
          '          env: [{name: A, value: b}, {name: NODE_OPTIONS, value: " --x=1  --y "}]',
          '          resources: {limits: {memory: 256Mi}}',
        ].join('\n'),
      ].join('\n---\n'),
    );
    expect(containerMemory(file, 'w', 'c')).toEqual({ limitBytes: 256 * 1024 * 1024, nodeOptions: ['--x=1', '--y'] });
    expect(containerMemory(file, 'other', 'c')).toEqual({ limitBytes: 1024 ** 3, nodeOptions: [] });
    expect(() => containerMemory(file, 'w', 'missing')).toThrow('no container missing');
    expect(() => containerMemory(file, 'none', 'c')).toThrow('no Deployment none');
  });

  it('reads the pod-watcher Deployment the scale benchmark runs as', () => {
    const pw = containerMemory(
      join(__dirname, '..', '..', '..', '..', 'infra', 'k8s', 'base', 'pod-watcher.yaml'),
      'triad-pod-watcher',
      'pod-watcher',
    );
    expect(pw.limitBytes).toBeGreaterThan(0);
    expect(pw.nodeOptions).toContain('--max-semi-space-size=2');
  });
});
