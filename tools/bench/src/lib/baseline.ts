import { readFileSync, writeFileSync } from 'node:fs';

/** Which way is better for a figure. */
export type Better = 'lower' | 'higher';

/** One committed figure: its value and its run-to-run spread (a fraction of the value, e.g. 0.1 for ±10 %). */
export interface BaselineFigure {
  readonly value: number;
  readonly spread: number;
  readonly better: Better;
}

/**
 * A committed baseline of one benchmark (a JSON file in tools/bench): figures by name, and where they came from
 * (date, machine, command), so a warning can say what it compares against.
 */
export interface Baseline {
  readonly source: string;
  readonly figures: Readonly<Record<string, BaselineFigure>>;
}

export function readBaseline(file: string): Baseline {
  return JSON.parse(readFileSync(file, 'utf8')) as Baseline;
}

/**
 * A warning for every measured figure that is worse than its baseline by more than the baseline's spread. Figures
 * without a baseline, and baselines not measured in this run, are left alone (a run of some cases only).
 */
export function regressions(baseline: Baseline, measured: Readonly<Record<string, number>>): string[] {
  const out: string[] = [];
  for (const [name, value] of Object.entries(measured)) {
    const b = baseline.figures[name];
    if (b === undefined || !Number.isFinite(value)) continue;
    const worse = b.better === 'lower' ? value > b.value * (1 + b.spread) : value < b.value * (1 - b.spread);
    if (!worse) continue;
    const change = ((value / b.value - 1) * 100).toFixed(0);
    out.push(
      `WARNING: ${name} = ${round(value)} is worse than the baseline ${round(b.value)} (${Number(change) > 0 ? '+' : ''}${change} %) by more ` +
        `than its run-to-run spread (±${(b.spread * 100).toFixed(0)} %; baseline: ${baseline.source})`,
    );
  }
  return out;
}

/**
 * Writes `measured` as a new baseline; each figure keeps the spread and direction it had in `previous` (or takes
 * `defaults` by figure kind: the text after the last `|`).
 */
export function writeBaseline(
  file: string,
  source: string,
  measured: Readonly<Record<string, number>>,
  kinds: Readonly<Record<string, Omit<BaselineFigure, 'value'>>>,
  previous?: Baseline,
): void {
  const figures: Record<string, BaselineFigure> = {};
  for (const [name, value] of Object.entries(measured)) {
    if (!Number.isFinite(value)) continue;
    const kind = kinds[name.slice(name.lastIndexOf('|') + 1)];
    const old = previous?.figures[name];
    const shape = old ?? kind;
    if (shape === undefined) continue;
    figures[name] = { value: round(value), spread: shape.spread, better: shape.better };
  }
  writeFileSync(file, `${JSON.stringify({ source, figures }, null, 2)}\n`);
}

function round(v: number): number {
  return Math.abs(v) >= 100 ? Math.round(v) : Math.round(v * 1000) / 1000;
}
