import { makePolicy } from '../cluster-sim/policy-set';
import { runSimulation, type PoolKind, type RunMetrics } from '../cluster-sim/simulate';
import type { WorkloadSpec } from '../cluster-sim/workload';
import type { CellResult } from './cell';
import { CLUSTER_COST } from './engine-profile';
import { SIM_POLICY, type ProcessPolicy } from './policies';

/** The simulator's run of one process cell: same workload, seed, requests, pool size and offered rate. */
export function simulateCell(
  pool: PoolKind,
  workload: WorkloadSpec,
  policy: ProcessPolicy,
  engines: number,
  ratePerS: number,
  requests: number,
  seed: number,
  warmup: number,
): RunMetrics {
  return runSimulation((p) => makePolicy(SIM_POLICY[policy], p), {
    pool,
    workload,
    capacity: ratePerS,
    engines,
    load: 1,
    requests,
    seed,
    cost: CLUSTER_COST,
    warmup,
  });
}

export interface CalibrationRow {
  readonly cell: CellResult;
  readonly sim: RunMetrics;
  /** The same cell's random-policy runs (for ratios), when the run had them. */
  readonly randomCell?: CellResult;
  readonly randomSim?: RunMetrics;
}

/** Relative deviation of the process figure from the simulator's ((process − sim) / sim). */
export function deviation(process: number, sim: number): number {
  if (!Number.isFinite(process) || !Number.isFinite(sim) || sim === 0) return NaN;
  return (process - sim) / Math.abs(sim);
}

const pct = (x: number) => (Number.isFinite(x) ? `${(x * 100).toFixed(0)} %` : '–');
const ratio = (x: number) => (Number.isFinite(x) ? `×${x.toFixed(2)}` : '–');
const dev = (x: number) => (Number.isFinite(x) ? `${x >= 0 ? '+' : ''}${(x * 100).toFixed(0)} %${Math.abs(x) > 0.1 ? ' !' : ''}` : '–');

/**
 * Rows of the calibration table: per cell, the figures that carry across (ratios to random in the same run, hit
 * ratios), process vs simulator, and their deviation (`!` beyond 10 %).
 */
export function calibrationRows(rows: readonly CalibrationRow[]): string[][] {
  return rows.map(({ cell, sim, randomCell, randomSim }) => {
    const p50p = randomCell ? cell.ttftP50 / randomCell.ttftP50 : NaN;
    const p50s = randomSim ? sim.ttftP50 / randomSim.ttftP50 : NaN;
    const p99p = randomCell ? cell.ttftP99 / randomCell.ttftP99 : NaN;
    const p99s = randomSim ? sim.ttftP99 / randomSim.ttftP99 : NaN;
    return [
      `${cell.pool} · ${cell.workload} · ${Math.round(cell.load * 100)} %`,
      cell.policy,
      `${ratio(p50p)} / ${ratio(p50s)}`,
      dev(deviation(p50p, p50s)),
      `${ratio(p99p)} / ${ratio(p99s)}`,
      dev(deviation(p99p, p99s)),
      `${pct(cell.prefixHit)} / ${pct(sim.prefixHit)}`,
      dev(deviation(cell.prefixHit, sim.prefixHit)),
      `${pct(cell.encoderHit)} / ${pct(sim.encoderHit)}`,
      dev(deviation(cell.encoderHit, sim.encoderHit)),
      `${Math.round(cell.ttftP50)} / ${Math.round(sim.ttftP50)}`,
    ];
  });
}

export const CALIBRATION_HEADERS = [
  'cell',
  'policy',
  'TTFT p50 vs random (process / sim)',
  'dev',
  'TTFT p99 vs random',
  'dev',
  'prefix hit',
  'dev',
  'encoder hit',
  'dev',
  'TTFT p50 ms (process / sim)',
];
