import { basename } from 'node:path';
import type { Classified } from './allow-list';
import type { Difference, RequestResult } from './diff';
import type { RouterRun } from './run';

/** One reference's comparison, ready to print. */
export interface Comparison {
  readonly reference: string;
  readonly upstream: string;
  /** Cases not run for this reference, with the reason. */
  readonly skipped: Readonly<Record<string, string>>;
  /** The local copy's path and SHA-256 (which version was compared). */
  readonly copy: { readonly path: string; readonly sha256: string };
  readonly referenceRun: RouterRun;
  readonly triadRun: RouterRun;
  readonly differences: readonly Difference[];
  readonly classified: Classified;
}

function cell(v: unknown): string {
  const text = typeof v === 'string' ? v : JSON.stringify(v);
  return text.replace(/\|/g, '\\|').replace(/\n/g, ' ');
}

function summary(r: RequestResult | undefined): string {
  if (!r) return '—';
  const legs = r.trace.order.join('→') || 'no legs';
  const overlap = r.trace.overlaps.length > 0 ? ` (${r.trace.overlaps.join(', ')} overlap)` : '';
  const outcome = Object.entries(r.outcome)
    .filter(([k]) =>
      /kvPullsReceived|localPrefillFallbacks|roomsMatched|bootstrapTimeouts|kvHeldRequests|localEncodes|kvPullFailures|faultsInjected/.test(
        k,
      ),
    )
    .map(([k, v]) => `${k} ${v}`)
    .join(', ');
  return `${r.client.status}${r.client.complete ? '' : ' (incomplete)'}; ${legs}${overlap}${outcome ? `; ${outcome}` : ''}`;
}

/** The Markdown section of one reference. */
export function renderComparison(c: Comparison): string {
  const lines: string[] = [];
  const { allowed, unexplained, unused } = c.classified;
  lines.push(`### ${c.reference}`, '');
  lines.push(`Upstream \`${c.upstream}\`; local copy \`${basename(c.copy.path)}\`, SHA-256 \`${c.copy.sha256.slice(0, 16)}…\`.`, '');
  lines.push(
    `${c.referenceRun.results.length} requests compared; ${c.differences.length} differences: ${unexplained.length} unexplained, ${allowed.length} allowed.`,
    '',
  );
  for (const [name, why] of Object.entries(c.skipped)) lines.push(`Not run: ${name} (${why}).`, '');
  for (const run of [c.referenceRun, c.triadRun]) {
    if (run.prefillMissing.length > 0) lines.push(`**${run.router}: prefill leg missing** in ${run.prefillMissing.join('; ')}.`, '');
  }
  lines.push('| case | reference | Triad | unexplained | allowed |', '|---|---|---|---|---|');
  const byCase = (cs: string, list: readonly { case: string }[]) => list.filter((d) => d.case === cs).length;
  const names = ['setup', ...c.referenceRun.results.map((r) => r.case)];
  for (const name of names) {
    const ref = name === 'setup' ? undefined : c.referenceRun.results.find((r) => r.case === name);
    const tri = name === 'setup' ? undefined : c.triadRun.results.find((r) => r.case === name);
    const setupCell = (run: RouterRun) => run.setup.legs.map((l) => `${l.method} ${l.stage} ${l.path}`).join(', ') || 'nothing';
    lines.push(
      `| ${cell(name)} | ${cell(name === 'setup' ? setupCell(c.referenceRun) : summary(ref))} | ${cell(name === 'setup' ? setupCell(c.triadRun) : summary(tri))} | ${byCase(name, unexplained)} | ${byCase(
        name,
        allowed.map((a) => a.difference),
      )} |`,
    );
  }
  lines.push('');
  if (unexplained.length > 0) {
    lines.push('Unexplained differences (reference → Triad), each with the cases it occurs in:', '');
    const groups = new Map<string, { d: Difference; cases: string[] }>();
    for (const d of unexplained) {
      const id = JSON.stringify([d.key, d.reference, d.triad]);
      const g = groups.get(id) ?? { d, cases: [] };
      g.cases.push(d.case);
      groups.set(id, g);
    }
    for (const { d, cases } of groups.values()) {
      const where = cases.length === names.length - 1 ? 'every case' : cases.join('; ');
      lines.push(`- \`${d.key}\`: ${cell(d.reference)} → ${cell(d.triad)} (${where})`);
    }
    lines.push('');
  }
  if (allowed.length > 0) {
    lines.push('Allowed differences:', '');
    const byEntry = new Map<string, { reason: string; items: Difference[] }>();
    for (const a of allowed) {
      const e = byEntry.get(a.entry.id) ?? { reason: a.entry.reason, items: [] };
      e.items.push(a.difference);
      byEntry.set(a.entry.id, e);
    }
    for (const [id, e] of byEntry) {
      const keys = [...new Set(e.items.map((d) => d.key))].slice(0, 6);
      lines.push(`- **${id}** (${e.items.length}; e.g. ${keys.map((k) => `\`${k}\``).join(', ')}): ${e.reason}`);
    }
    lines.push('');
  }
  if (unused.length > 0) lines.push(`Allow-list entries that matched nothing here: ${unused.map((e) => e.id).join(', ')}.`, '');
  return lines.join('\n');
}
