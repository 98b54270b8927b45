import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';

/** The PrometheusRule manifest the kustomize component ships; its `spec` is a plain Prometheus rule file. */
export const RULES_MANIFEST = join(__dirname, '../../../infra/monitoring/prometheus-rules.yaml');
/** The promtool unit tests of those rules; they load `triad.rules.yaml` from their own directory. */
export const RULES_TESTS = join(__dirname, '../../../infra/monitoring/tests/triad-rules.test.yaml');
export const RULES_FILE_NAME = 'triad.rules.yaml';

export interface Rule {
  readonly group: string;
  readonly record?: string;
  readonly alert?: string;
  readonly expr: string;
}

interface RuleGroups {
  readonly groups: readonly { name: string; rules: readonly { record?: string; alert?: string; expr: string }[] }[];
}

/** The rule groups of the manifest (its `spec`); throws when the file is not a PrometheusRule. */
export function ruleGroups(file = RULES_MANIFEST): RuleGroups {
  const doc = parse(readFileSync(file, 'utf8')) as { kind?: string; spec?: RuleGroups };
  if (doc.kind !== 'PrometheusRule' || !Array.isArray(doc.spec?.groups)) {
    throw new Error(`${file} is not a PrometheusRule with spec.groups`);
  }
  return doc.spec;
}

/** Every recording and alerting rule, flattened. */
export function allRules(groups = ruleGroups()): Rule[] {
  return groups.groups.flatMap((g) => g.rules.map((r) => ({ group: g.name, ...r, expr: r.expr.trim() })));
}

/** Writes the plain rule file into `dir` (for prometheus and promtool) and returns its path. */
export function writeRulesFile(dir: string): string {
  mkdirSync(dir, { recursive: true });
  const path = join(dir, RULES_FILE_NAME);
  writeFileSync(path, stringify(ruleGroups()));
  return path;
}

/** Writes the rule file and a copy of the unit tests side by side in `dir`; returns the test file's path. */
export function writeRulesTests(dir: string): string {
  writeRulesFile(dir);
  const path = join(dir, 'triad-rules.test.yaml');
  writeFileSync(path, readFileSync(RULES_TESTS, 'utf8'));
  return path;
}

interface UnitTests {
  readonly tests: readonly { alert_rule_test?: readonly { alertname: string; exp_alerts?: readonly unknown[] }[] }[];
}

/** The alert names the unit tests check at some time with `firing` (non-empty `exp_alerts`) or silent ones. */
function alertsTested(file: string, firing: boolean): Set<string> {
  const doc = parse(readFileSync(file, 'utf8')) as UnitTests;
  const cases = doc.tests.flatMap((t) => t.alert_rule_test ?? []);
  return new Set(cases.filter((a) => (a.exp_alerts ?? []).length > 0 === firing).map((a) => a.alertname));
}

/** The alert names the unit tests expect to fire at least once. */
export const alertsTestedFiring = (file = RULES_TESTS): Set<string> => alertsTested(file, true);

/** The alert names the unit tests expect to stay silent at least once. */
export const alertsTestedSilent = (file = RULES_TESTS): Set<string> => alertsTested(file, false);
