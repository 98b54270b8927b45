import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readBaseline, regressions, runtimeMismatch, runtimeOf, writeBaseline, type Baseline } from './baseline';

const baseline: Baseline = {
  source: 'quiet VM, 2026-12-06',
  figures: {
    'gateway EPD|JSON|32|cpu-us': { value: 200, spread: 0.1, better: 'lower' },
    'gateway EPD|JSON|32|rps': { value: 2000, spread: 0.1, better: 'higher' },
  },
};

describe('bench regression guard', () => {
  it('warns only for figures worse than the baseline by more than the spread', () => {
    expect(regressions(baseline, { 'gateway EPD|JSON|32|cpu-us': 215, 'gateway EPD|JSON|32|rps': 1850 })).toEqual([]);
    const warnings = regressions(baseline, { 'gateway EPD|JSON|32|cpu-us': 250, 'gateway EPD|JSON|32|rps': 1500 });
    expect(warnings).toHaveLength(2);
    expect(warnings[0]).toContain('gateway EPD|JSON|32|cpu-us = 250 is worse than the baseline 200 (+25 %)');
    expect(warnings[1]).toContain('rps = 1500 is worse than the baseline 2000 (-25 %)');
    expect(warnings[1]).toContain('quiet VM, 2026-12-06');
  });

  it('never warns for a better figure, a figure without a baseline, or one that was not measured', () => {
    expect(regressions(baseline, { 'gateway EPD|JSON|32|cpu-us': 100, 'gateway EPD|JSON|32|rps': 5000, 'other|cpu-us': 1e9 })).toEqual([]);
    expect(regressions(baseline, { 'gateway EPD|JSON|32|cpu-us': NaN })).toEqual([]);
  });

  it('writes a baseline that keeps each figure its spread, or takes the default of its kind', () => {
    const dir = mkdtempSync(join(tmpdir(), 'bench-baseline-'));
    try {
      const file = join(dir, 'b.json');
      writeBaseline(
        file,
        'this run',
        { 'gateway EPD|JSON|32|cpu-us': 180.4, 'gateway agg|JSON|32|cpu-us': 70, 'x|unknown-kind': 1 },
        { 'cpu-us': { spread: 0.15, better: 'lower' } },
        baseline,
      );
      const written = readBaseline(file);
      expect(written.source).toBe('this run');
      expect(written.figures['gateway EPD|JSON|32|cpu-us']).toEqual({ value: 180, spread: 0.1, better: 'lower' });
      expect(written.figures['gateway agg|JSON|32|cpu-us']).toEqual({ value: 70, spread: 0.15, better: 'lower' });
      expect(written.figures['x|unknown-kind']).toBeUndefined();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('the runtime a baseline belongs to', () => {
  it('names the Node major line and whether triad ran as the bundle or through tsx', () => {
    expect(runtimeOf('/x/dist/apps/cli/main.cjs', 'v24.19.0')).toBe('node 24, bundle');
    expect(runtimeOf('/x/apps/cli/bin/triad.js', 'v20.20.2')).toBe('node 20, sources through tsx');
    expect(runtimeOf('/x/apps/cli/bin/triad.js', 'v20.19.0')).toBe(runtimeOf('/y/apps/cli/bin/triad.js', 'v20.20.2'));
  });

  it('judges a run only against a baseline of the same runtime, or one that recorded none', () => {
    expect(runtimeMismatch({ ...baseline, runtime: 'node 24, bundle' }, 'node 24, bundle')).toBeUndefined();
    expect(runtimeMismatch(baseline, 'node 20, sources through tsx')).toBeUndefined();
    expect(runtimeMismatch({ ...baseline, runtime: 'node 24, bundle' }, 'node 20, bundle')).toBe(
      'the baseline was taken on node 24, bundle, this run is on node 20, bundle',
    );
  });

  it('is written into the baseline file when given', () => {
    const dir = mkdtempSync(join(tmpdir(), 'bench-baseline-'));
    try {
      const file = join(dir, 'b.json');
      writeBaseline(file, 'this run', { 'a|cpu-us': 1 }, { 'cpu-us': { spread: 0.1, better: 'lower' } }, undefined, 'node 24, bundle');
      expect(readBaseline(file).runtime).toBe('node 24, bundle');
      writeBaseline(file, 'this run', { 'a|cpu-us': 1 }, { 'cpu-us': { spread: 0.1, better: 'lower' } });
      expect(readBaseline(file).runtime).toBeUndefined();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
