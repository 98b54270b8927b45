/**
 * Writes the Grafana dashboards of ./dashboards to infra/monitoring/dashboards/*.json (what the kustomize component
 * ships). `--check` writes nothing and exits 1 when a file differs from what the code generates.
 *
 *   npx tsx tools/monitoring/src/generate-dashboards.ts [--check]
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DASHBOARDS, dashboardJson } from './dashboards';

export const DASHBOARD_DIR = join(__dirname, '../../../infra/monitoring/dashboards');

/** Each dashboard file's expected text. */
export function renderDashboards(): Map<string, string> {
  return new Map(Object.entries(DASHBOARDS).map(([file, spec]) => [file, `${JSON.stringify(dashboardJson(spec), null, 2)}\n`]));
}

/** The files whose committed text differs from the generated one. */
export function staleDashboards(dir = DASHBOARD_DIR): string[] {
  const differs = (file: string, text: string) => !existsSync(join(dir, file)) || readFileSync(join(dir, file), 'utf8') !== text;
  return [...renderDashboards()].filter(([file, text]) => differs(file, text)).map(([file]) => file);
}

if (require.main === module) {
  if (process.argv.includes('--check')) {
    const stale = staleDashboards();
    if (stale.length > 0) {
      process.stderr.write(`out of date: ${stale.join(', ')} (run npx tsx tools/monitoring/src/generate-dashboards.ts)\n`);
      process.exit(1);
    }
  } else {
    for (const [file, text] of renderDashboards()) writeFileSync(join(DASHBOARD_DIR, file), text);
    process.stdout.write(`wrote ${[...renderDashboards().keys()].join(', ')} to infra/monitoring/dashboards\n`);
  }
}
