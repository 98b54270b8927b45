import { epdStages } from './epd-stages';
import type { DashboardSpec } from './grafana';
import { overview } from './overview';
import { podWatcher } from './pod-watcher';
import { scheduler } from './scheduler';

export { dashboardJson } from './grafana';
export type { DashboardSpec, PanelSpec, Query, RowSpec, VariableSpec } from './grafana';

/** Every dashboard, by the file name it is written to under infra/monitoring/dashboards. */
export const DASHBOARDS: Readonly<Record<string, DashboardSpec>> = {
  'triad-overview.json': overview,
  'triad-epd-stages.json': epdStages,
  'triad-scheduler.json': scheduler,
  'triad-pod-watcher.json': podWatcher,
};
