import type { RunMetrics } from './simulate';

const TRIAD = /^triad \((default|--triad-config)\)/;
const ANY_TRIAD = /^triad/;
const ORACLE = /^oracle/;

/** Share by which `v` is lower than `base` (0.6 = 60 % lower); an infinite base counts as fully improved. */
const lower = (v: number, base: number): number => (base === Infinity ? (v === Infinity ? 0 : 1) : 1 - v / base);

/**
 * The goals, checked on one run's figures: the chat workload against random (TTFT p50 ≥ 60 % lower, p99 ≥ 50 %
 * lower, goodput ≥ 2×), the multimodal encoder-cache hit ratio within 10 % of the oracle's, and the mixed workload
 * within 5 % of the best other policy (oracle excluded) on TTFT p50/p99, E2E p50 and goodput. One row per check.
 */
export function goalRows(all: readonly RunMetrics[]): string[][] {
  const rows: string[][] = [];
  for (const pool of [...new Set(all.map((r) => r.pool ?? 'aggregated'))]) {
    const results = all.filter((r) => (r.pool ?? 'aggregated') === pool);
    for (const row of poolGoalRows(results)) rows.push([pool, ...row]);
  }
  return rows;
}

function poolGoalRows(results: readonly RunMetrics[]): string[][] {
  const rows: string[][] = [];
  const loads = [...new Set(results.map((r) => r.load))].sort((a, b) => a - b);
  const at = (w: string, load: number) => results.filter((r) => r.workload === w && r.load === load);
  const pct = (x: number) => `${(x * 100).toFixed(1)} %`;
  const mark = (ok: boolean) => (ok ? 'met' : '**missed**');
  for (const load of loads) {
    const l = `${Math.round(load * 100)} %`;
    const chat = at('chat', load);
    const t = chat.find((r) => TRIAD.test(r.policy));
    const rnd = chat.find((r) => r.policy === 'random');
    if (t && rnd) {
      const p50 = lower(t.ttftP50, rnd.ttftP50),
        p99 = lower(t.ttftP99, rnd.ttftP99),
        gp = t.goodput / rnd.goodput;
      rows.push(['chat', l, 'TTFT p50 vs random ≥ 60 % lower', pct(p50), mark(p50 >= 0.6)]);
      rows.push(['chat', l, 'TTFT p99 vs random ≥ 50 % lower', pct(p99), mark(p99 >= 0.5)]);
      rows.push(['chat', l, 'goodput vs random ≥ 2×', Number.isFinite(gp) ? `${gp.toFixed(1)}×` : `∞× (random: 0)`, mark(gp >= 2)]);
    }
    const mm = at('multimodal', load);
    const tm = mm.find((r) => TRIAD.test(r.policy));
    const om = mm.find((r) => ORACLE.test(r.policy));
    if (tm && om) {
      const ratio = tm.encoderHit / om.encoderHit;
      rows.push([
        'multimodal',
        l,
        "encoder hit ≥ 90 % of the oracle's",
        `${pct(tm.encoderHit)} vs ${pct(om.encoderHit)}`,
        mark(ratio >= 0.9),
      ]);
    }
    const mx = at('mixed', load);
    const tx = mx.find((r) => TRIAD.test(r.policy));
    const others = mx.filter((r) => !ANY_TRIAD.test(r.policy) && !ORACLE.test(r.policy));
    if (tx && others.length > 0) {
      for (const [key, label] of [
        ['ttftP50', 'TTFT p50'],
        ['ttftP99', 'TTFT p99'],
        ['e2eP50', 'E2E p50'],
      ] as const) {
        const best = others.reduce((a, b) => (b[key] < a[key] ? b : a));
        const worse = tx[key] / best[key] - 1;
        rows.push([
          'mixed',
          l,
          `${label} ≤ best other + 5 %`,
          `${Math.round(tx[key])} vs ${Math.round(best[key])} ms (${best.policy})`,
          mark(worse <= 0.05),
        ]);
      }
      const best = others.reduce((a, b) => (b.goodput > a.goodput ? b : a));
      rows.push([
        'mixed',
        l,
        'goodput ≥ best other − 5 %',
        `${tx.goodput.toFixed(1)} vs ${best.goodput.toFixed(1)} (${best.policy})`,
        mark(tx.goodput >= 0.95 * best.goodput),
      ]);
    }
  }
  return rows;
}

export const GOAL_HEADERS = ['pool', 'workload', 'load', 'goal', 'Triad', 'result'];
