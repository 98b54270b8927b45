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
  /** What ran the measured code (`runtimeOf`): figures taken on another Node line or build are not comparable. */
  readonly runtime?: string;
  readonly figures: Readonly<Record<string, BaselineFigure>>;
}

/**
 * The runtime a benchmark's figures belong to: the Node major line (one V8 major each) and whether `triad` ran as the
 * esbuild bundle (what the image runs) or as the TypeScript sources through tsx. Another V8 moves the figures by more
 * than their spread (node 24 runs hot code in Maglev before TurboFan, node 20 does not), so the guard compares only
 * like with like.
 */
export function runtimeOf(triadBin: string, nodeVersion: string = process.version): string {
  const major = /^v?(\d+)/.exec(nodeVersion)?.[1] ?? nodeVersion;
  return `node ${major}, ${triadBin.endsWith('.cjs') ? 'bundle' : 'sources through tsx'}`;
}

/** Why `baseline` cannot judge a run on `runtime`, or undefined when it can (same runtime, or none recorded). */
export function runtimeMismatch(baseline: Baseline, runtime: string): string | undefined {
  if (baseline.runtime === undefined || baseline.runtime === runtime) return undefined;
  return `the baseline was taken on ${baseline.runtime}, this run is on ${runtime}`;
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
  runtime?: string,
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
  writeFileSync(file, `${JSON.stringify({ source, ...(runtime !== undefined ? { runtime } : {}), figures }, null, 2)}\n`);
}

function round(v: number): number {
  return Math.abs(v) >= 100 ? Math.round(v) : Math.round(v * 1000) / 1000;
}
