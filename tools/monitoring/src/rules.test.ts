import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { DASHBOARDS, dashboardJson } from './dashboards';
import { presenceQuery, substitute } from './expressions';
import { staleDashboards } from './generate-dashboards';
import { alertsTestedFiring, alertsTestedSilent, allRules, ruleGroups, writeRulesFile, writeRulesTests } from './rules';
import { promtool, requireTool } from './tools';

// The rules and dashboards of infra/monitoring checked offline: promtool's own checks and the unit tests of every
// alert (tests/triad-rules.test.yaml), and that the shipped dashboard JSON is what the code in ./dashboards makes.
// live.test.ts evaluates all of it against a running stack.

const dir = mkdtempSync(join(tmpdir(), 'triad-rules-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('Prometheus rules (infra/monitoring/prometheus-rules.yaml)', () => {
  it('promtool and prometheus are installed (the tests below run them)', () => {
    expect(requireTool('promtool')).toBeTruthy();
    expect(requireTool('prometheus')).toBeTruthy();
  });

  it('pass `promtool check rules`', () => {
    const file = writeRulesFile(dir);
    const r = promtool(['check', 'rules', file]);
    expect(r.output).toContain(`SUCCESS: ${allRules().length} rules found`);
    expect(r.status).toBe(0);
  });

  it('pass their unit tests (`promtool test rules`)', () => {
    const tests = writeRulesTests(join(dir, 'unit'));
    const r = promtool(['test', 'rules', tests]);
    expect(r.output).toContain('SUCCESS');
    expect(r.status).toBe(0);
  });

  it('a broken expectation fails the unit tests (they check something)', () => {
    const tests = writeRulesTests(join(dir, 'broken'));
    const text = readFileSync(tests, 'utf8').replace('summary: 12.5% of vl requests', 'summary: 11% of vl requests');
    writeFileSync(tests, text);
    const r = promtool(['test', 'rules', tests]);
    expect(r.status).not.toBe(0);
    expect(r.output).toContain('summary="12.5% of vl requests fail with 5xx"');
  });

  it('every alert has a unit test where it fires and one where it stays silent', () => {
    const alerts = allRules()
      .filter((r) => r.alert)
      .map((r) => r.alert as string);
    expect(alerts.length).toBeGreaterThanOrEqual(12);
    const firing = alertsTestedFiring();
    const silent = alertsTestedSilent();
    expect(alerts.filter((a) => !firing.has(a))).toEqual([]);
    expect(alerts.filter((a) => !silent.has(a))).toEqual([]);
  });

  it('every alert has a severity, a summary and a description; recording rules follow level:metric:operations', () => {
    for (const group of ruleGroups().groups) {
      type RuleYaml = { alert?: string; record?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
      for (const rule of group.rules as unknown as RuleYaml[]) {
        if (rule.alert) {
          expect(`${rule.alert}: ${rule.labels?.['severity']}`).toMatch(/: (warning|critical)$/);
          expect(rule.annotations?.['summary']).toBeTruthy();
          expect(rule.annotations?.['description']).toBeTruthy();
        } else {
          expect(rule.record).toMatch(/^triad:[a-z0-9_]+:[a-z0-9_]+$/);
        }
      }
    }
  });
});

describe('PromQL rewriting for the live test', () => {
  it('adds bool to comparisons written with spaces, not to label matchers', () => {
    expect(presenceQuery('triad:x:rate5m > 0.05')).toBe('triad:x:rate5m > bool 0.05');
    expect(presenceQuery('up{job=~"a|b"} == 0')).toBe('up{job=~"a|b"} == bool 0');
    expect(presenceQuery('sum(x{outcome!="ok"}) >= bool 1')).toBe('sum(x{outcome!="ok"}) >= bool 1');
  });

  it('substitutes Grafana variables and refuses unknown ones', () => {
    expect(substitute('rate(x{model=~"$model",s="${s}"}[$__rate_interval])', { model: 'a', s: 'b' })).toBe('rate(x{model=~"a",s="b"}[1m])');
    expect(() => substitute('x{m="$nope"}', {})).toThrow('no value for variable $nope');
  });
});

describe('Grafana dashboards (infra/monitoring/dashboards)', () => {
  it('are the JSON the code in tools/monitoring/src/dashboards generates', () => {
    expect(staleDashboards()).toEqual([]);
  });

  it('are all shipped by the kustomize component, one ConfigMap each, with unique uids', () => {
    const file = join(__dirname, '../../../infra/monitoring/kustomization.yaml');
    const k = parse(readFileSync(file, 'utf8')) as { configMapGenerator: { files: string[] }[] };
    const shipped = k.configMapGenerator
      .flatMap((g) => g.files)
      .map((f) => f.replace(/^dashboards\//, ''))
      .sort();
    expect(shipped).toEqual(Object.keys(DASHBOARDS).sort());
    const uids = Object.values(DASHBOARDS).map((d) => d.uid);
    expect(new Set(uids).size).toBe(uids.length);
  });

  it('every panel queries the data source variable and says what it shows', () => {
    for (const spec of Object.values(DASHBOARDS)) {
      type PanelJson = { type: string; title: string; description?: string; datasource?: { uid: string }; targets?: unknown[] };
      const json = dashboardJson(spec) as { panels: PanelJson[] };
      for (const p of json.panels.filter((panel) => panel.type !== 'row')) {
        expect(`${spec.uid}/${p.title}: ${p.datasource?.uid}`).toBe(`${spec.uid}/${p.title}: \${datasource}`);
        expect(p.description?.length).toBeGreaterThan(10);
        expect(p.targets?.length).toBeGreaterThan(0);
      }
    }
  });
});
