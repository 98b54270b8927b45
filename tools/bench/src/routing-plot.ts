// Draws routing-quality.ts's JSON as an SVG: per workload, TTFT p50, TTFT p99 (log scale) and goodput against the
// offered load, one line per policy; prints the goals check of the same figures.
// Several result files (e.g. one run per pool) are drawn together, one row per pool and workload.
// Run: npx tsx tools/bench/src/routing-plot.ts docs/img/routing-quality.svg results.json [more.json ...]
import { readFileSync, writeFileSync } from 'node:fs';
import { GOAL_HEADERS, goalRows } from './cluster-sim/goals';
import type { RunMetrics } from './cluster-sim/simulate';
import { parseResults } from './lib/result-json';
import { markdownTable } from './lib/table';

interface Results {
  readonly engines: number;
  readonly requests: number;
  readonly seed: number;
  readonly results: RunMetrics[];
}

const [output, ...inputs] = process.argv.slice(2);
if (!output || inputs.length === 0 || !output.endsWith('.svg'))
  throw new Error('usage: routing-plot.ts OUT.svg RESULTS.json [MORE.json ...]');
const files = inputs.map((f) => parseResults<Results>(readFileSync(f, 'utf8')));
const data: Results = { ...files[0], results: files.flatMap((f) => f.results) };
/** A panel row: pool and workload (results of runs before pools existed are aggregated). */
const rowOf = (r: RunMetrics): string => `${r.pool ?? 'aggregated'} · ${r.workload}`;

const COLORS = ['#d62728', '#7f7f7f', '#bcbd22', '#1f77b4', '#ff7f0e', '#2ca02c', '#9467bd', '#8c564b', '#e377c2', '#17becf'];
const workloads = [...new Set(data.results.map(rowOf))];
const policies = [...new Set(data.results.map((r) => r.policy))];
const loads = [...new Set(data.results.map((r) => r.load))].sort((a, b) => a - b);
type Metric = { key: 'ttftP50' | 'ttftP99' | 'goodput'; title: string; log: boolean };
const metrics: Metric[] = [
  { key: 'ttftP50', title: 'TTFT p50 (ms, log)', log: true },
  { key: 'ttftP99', title: 'TTFT p99 (ms, log)', log: true },
  { key: 'goodput', title: 'goodput (req/s within SLO)', log: false },
];

const PW = 300,
  PH = 200,
  ML = 60,
  MT = 40,
  GAP = 50,
  LEGEND = 230;
const width = ML + metrics.length * (PW + GAP) + LEGEND;
const height = MT + workloads.length * (PH + GAP + 20) + 20;
const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;');
const parts: string[] = [];
parts.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif" font-size="11">`);
parts.push(`<rect width="100%" height="100%" fill="white"/>`);
parts.push(
  `<text x="${ML}" y="20" font-size="14" font-weight="bold">Routing quality, ${data.engines} simulated engines, ` +
    `${data.requests} requests per cell, seed ${data.seed} (simulated time)</text>`,
);

workloads.forEach((w, row) => {
  metrics.forEach((m, col) => {
    const x0 = ML + col * (PW + GAP);
    const y0 = MT + row * (PH + GAP + 20) + 20;
    const cells = data.results.filter((r) => rowOf(r) === w);
    const finite = cells.map((r) => r[m.key]).filter((v) => Number.isFinite(v) && v > 0);
    let lo = m.log ? Math.min(...finite) : 0;
    let hi = Math.max(...finite);
    if (m.log) {
      lo = Math.pow(10, Math.floor(Math.log10(lo)));
      hi = Math.pow(10, Math.ceil(Math.log10(hi)));
    } else hi *= 1.1;
    const sy = (v: number): number => {
      if (!Number.isFinite(v)) return y0 - 6;
      const f = m.log ? (Math.log10(Math.max(v, lo)) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo)) : v / hi;
      return y0 + PH - f * PH;
    };
    const sx = (i: number): number => x0 + 20 + (i * (PW - 40)) / Math.max(1, loads.length - 1);
    parts.push(`<text x="${x0}" y="${y0 - 8}" font-weight="bold">${esc(w)}: ${esc(m.title)}</text>`);
    parts.push(`<rect x="${x0}" y="${y0}" width="${PW}" height="${PH}" fill="none" stroke="#999"/>`);
    const ticks = m.log
      ? Array.from({ length: Math.round(Math.log10(hi) - Math.log10(lo)) + 1 }, (_, i) => lo * Math.pow(10, i))
      : [0, 0.25, 0.5, 0.75, 1].map((f) => f * hi);
    for (const t of ticks) {
      const y = sy(t);
      parts.push(`<line x1="${x0}" x2="${x0 + PW}" y1="${y}" y2="${y}" stroke="#eee"/>`);
      parts.push(`<text x="${x0 - 4}" y="${y + 4}" text-anchor="end">${t >= 1000 ? `${t / 1000}k` : Math.round(t)}</text>`);
    }
    loads.forEach((l, i) => parts.push(`<text x="${sx(i)}" y="${y0 + PH + 14}" text-anchor="middle">${Math.round(l * 100)} %</text>`));
    policies.forEach((p, pi) => {
      const pts = loads
        .map((l, i) => {
          const r = cells.find((c) => c.policy === p && c.load === l);
          return r ? `${sx(i)},${sy(r[m.key])}` : '';
        })
        .filter(Boolean);
      const color = COLORS[pi % COLORS.length];
      parts.push(`<polyline fill="none" stroke="${color}" stroke-width="2" points="${pts.join(' ')}"/>`);
      for (const pt of pts) {
        const [cx, cy] = pt.split(',');
        parts.push(`<circle cx="${cx}" cy="${cy}" r="3" fill="${color}"/>`);
      }
    });
  });
});
policies.forEach((p, pi) => {
  const x = ML + metrics.length * (PW + GAP);
  const y = MT + 30 + pi * 18;
  parts.push(`<rect x="${x}" y="${y - 9}" width="12" height="12" fill="${COLORS[pi % COLORS.length]}"/>`);
  parts.push(`<text x="${x + 18}" y="${y + 1}">${esc(p)}</text>`);
});
parts.push(
  `<text x="${ML + metrics.length * (PW + GAP)}" y="${MT + 30 + policies.length * 18 + 10}" fill="#666">top edge: ∞ (requests refused)</text>`,
);
parts.push('</svg>');
writeFileSync(output, parts.join('\n'));
console.log(`wrote ${output}\n\n${markdownTable(GOAL_HEADERS, goalRows(data.results))}`);
