/**
 * The PromQL a running Prometheus is asked in the live test: every rule expression and every dashboard query,
 * made answerable. An alert's expression is empty while the alert is not firing, so its comparisons get `bool`
 * (`x > 0.05` → `x > bool 0.05`): the result then has a sample wherever the compared series exist.
 */

const COMPARISON = /(\s)(==|!=|>=|<=|>|<)(\s+)(?!bool\b)/g;

/** The expression with `bool` after each comparison operator written with spaces around it. */
export function presenceQuery(expr: string): string {
  return expr.replace(COMPARISON, '$1$2 bool$3');
}

/** One query of a dashboard panel (or of a template variable). */
export interface DashboardQuery {
  readonly dashboard: string;
  readonly panel: string;
  readonly expr: string;
}

interface PanelJson {
  readonly type: string;
  readonly title: string;
  readonly targets?: readonly { expr: string }[];
  readonly panels?: readonly PanelJson[];
}

/** Every query of every panel (rows' nested panels included). */
export function panelQueries(dashboard: { title: string; panels: readonly PanelJson[] }): DashboardQuery[] {
  const out: DashboardQuery[] = [];
  const visit = (panels: readonly PanelJson[]) => {
    for (const p of panels) {
      for (const t of p.targets ?? []) out.push({ dashboard: dashboard.title, panel: p.title, expr: t.expr });
      if (p.panels) visit(p.panels);
    }
  };
  visit(dashboard.panels);
  return out;
}

/** A template variable of type query: `label_values(selector, label)`. */
export interface LabelValuesVariable {
  readonly name: string;
  readonly selector: string;
  readonly label: string;
}

/** The dashboard's query variables, in order (later ones may use earlier ones). */
interface TemplatingJson {
  readonly templating: { list: readonly { type: string; name: string; definition?: string }[] };
}

export function queryVariables(dashboard: TemplatingJson): LabelValuesVariable[] {
  return dashboard.templating.list
    .filter((v) => v.type === 'query')
    .map((v) => {
      const m = /^label_values\((.+),\s*([A-Za-z_][A-Za-z0-9_]*)\)$/.exec(v.definition ?? '');
      if (!m) throw new Error(`variable ${v.name}: only label_values(selector, label) queries are supported, got ${v.definition}`);
      return { name: v.name, selector: m[1], label: m[2] };
    });
}

/** Replaces Grafana's variables: `$__rate_interval` with `rateInterval`, `$name`/`${name}` with the given values. */
export function substitute(expr: string, values: Readonly<Record<string, string>>, rateInterval = '1m'): string {
  return expr
    .replace(/\$__rate_interval|\$\{__rate_interval\}/g, rateInterval)
    .replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)/g, (_whole, braced?: string, bare?: string) => {
      const name = braced ?? bare ?? '';
      const value = values[name];
      if (value === undefined) throw new Error(`no value for variable $${name} in ${expr}`);
      return value;
    });
}
