/**
 * A small builder for Grafana dashboard JSON (schema 39): rows of time-series and stat panels over one Prometheus
 * data source variable, laid out left to right on Grafana's 24-column grid. The dashboards in this folder are
 * written with it, so every panel has a data source, a unit and a description, and queries stay readable here.
 */

/** One PromQL query of a panel and its legend (`{{label}}` placeholders). */
export interface Query {
  readonly expr: string;
  readonly legend: string;
}

export interface PanelSpec {
  readonly title: string;
  /** What the panel shows and how to read it (Grafana shows it as the panel's info tooltip). */
  readonly description: string;
  readonly queries: readonly Query[];
  /** Grafana unit id: s, percentunit, reqps, ops, short, bytes, percent. */
  readonly unit: string;
  readonly kind?: 'timeseries' | 'stat';
  /** Columns out of 24 (default 8: three panels a row). */
  readonly width?: number;
  /** Stack the series (shares of a whole). */
  readonly stacked?: boolean;
}

export interface RowSpec {
  readonly title: string;
  readonly panels: readonly PanelSpec[];
}

/** A query variable: its values are a label's values on a metric (optionally filtered by earlier variables). */
export interface VariableSpec {
  readonly name: string;
  readonly label: string;
  /** `label_values(metric{...}, label)`. */
  readonly query: string;
  /** Several values at once, with an "All" entry (matching `.*`). */
  readonly multi: boolean;
}

export interface DashboardSpec {
  readonly uid: string;
  readonly title: string;
  readonly description: string;
  readonly variables: readonly VariableSpec[];
  readonly rows: readonly RowSpec[];
}

const DATASOURCE = { type: 'prometheus', uid: '${datasource}' } as const;
const PANEL_HEIGHT = 8;

/** A query helper: `q(expr, legend)`. */
export const q = (expr: string, legend: string): Query => ({ expr, legend });

function variableJson(v: VariableSpec): Record<string, unknown> {
  return {
    type: 'query',
    name: v.name,
    label: v.label,
    datasource: DATASOURCE,
    definition: v.query,
    query: { query: v.query, refId: `${v.name}-values` },
    refresh: 2,
    sort: 1,
    multi: v.multi,
    includeAll: v.multi,
    ...(v.multi ? { allValue: '.*' } : {}),
    current: {},
    hide: 0,
  };
}

function panelJson(p: PanelSpec, id: number, gridPos: { x: number; y: number; w: number; h: number }): Record<string, unknown> {
  const kind = p.kind ?? 'timeseries';
  const options =
    kind === 'stat'
      ? {
          reduceOptions: { calcs: ['lastNotNull'], fields: '', values: false },
          colorMode: 'value',
          graphMode: 'area',
          textMode: 'auto',
          orientation: 'auto',
        }
      : { legend: { displayMode: 'list', placement: 'bottom', showLegend: true }, tooltip: { mode: 'multi', sort: 'desc' } };
  const stacking = { mode: p.stacked ? 'normal' : 'none', group: 'A' };
  const custom = kind === 'timeseries' ? { custom: { fillOpacity: p.stacked ? 30 : 10, lineWidth: 1, showPoints: 'never', stacking } } : {};
  return {
    id,
    type: kind,
    title: p.title,
    description: p.description,
    datasource: DATASOURCE,
    gridPos,
    fieldConfig: { defaults: { unit: p.unit, min: 0, ...custom }, overrides: [] },
    options,
    targets: p.queries.map((query, i) => ({
      refId: String.fromCharCode(65 + i),
      datasource: DATASOURCE,
      expr: query.expr,
      legendFormat: query.legend,
      range: true,
    })),
  };
}

/** The dashboard's JSON model, ready for Grafana's import or its dashboard sidecar. */
export function dashboardJson(spec: DashboardSpec): Record<string, unknown> {
  const panels: Record<string, unknown>[] = [];
  let id = 1;
  let y = 0;
  for (const row of spec.rows) {
    panels.push({ id: id++, type: 'row', title: row.title, collapsed: false, gridPos: { x: 0, y, w: 24, h: 1 }, panels: [] });
    y += 1;
    let x = 0;
    for (const p of row.panels) {
      const w = p.width ?? 8;
      if (x + w > 24) {
        x = 0;
        y += PANEL_HEIGHT;
      }
      panels.push(panelJson(p, id++, { x, y, w, h: PANEL_HEIGHT }));
      x += w;
    }
    y += PANEL_HEIGHT;
  }
  return {
    uid: spec.uid,
    title: spec.title,
    description: spec.description,
    tags: ['triad'],
    timezone: 'browser',
    editable: true,
    schemaVersion: 39,
    version: 1,
    refresh: '30s',
    time: { from: 'now-1h', to: 'now' },
    graphTooltip: 1,
    annotations: { list: [] },
    links: [{ type: 'dashboards', tags: ['triad'], asDropdown: true, title: 'Triad dashboards', includeVars: false, keepTime: true }],
    templating: {
      list: [
        { type: 'datasource', name: 'datasource', label: 'Data source', query: 'prometheus', current: {}, hide: 0, refresh: 1 },
        ...spec.variables.map(variableJson),
      ],
    },
    panels,
  };
}
