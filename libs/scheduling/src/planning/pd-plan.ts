import type { Attempt } from '@triad/bus';
import { ErrorCode } from '@triad/errors';
import type { LoadedProfile } from '../config/load-config';
import type { Endpoint, IndexedEndpoint } from '../state/endpoint';
import type { ModelServerPool } from '../state/model-server-pool';
import type { Cycle } from './cycle';
import type { ExplanationRecorder } from './explanation';
import { runProfile, type ProfileRun, type RunOptions, type ScoreBuffers, type SchedulingObserver } from './profile-run';

export interface PairPlanInput {
  readonly cycle: Cycle;
  readonly decodeProfile: LoadedProfile;
  readonly prefillProfile: LoadedProfile;
  readonly pool: ModelServerPool;
  /** False for E→PD (no prefill labels): attempts are decode endpoints alone. */
  readonly withPrefill: boolean;
  readonly topN: number;
  readonly decodeBuffers: ScoreBuffers;
  readonly prefillBuffers: ScoreBuffers;
  readonly exclude?: ReadonlySet<string>;
  readonly recorder?: ExplanationRecorder;
  readonly observer?: SchedulingObserver;
}

export type PairPlan =
  | { readonly ok: true; readonly attempts: Attempt[]; readonly decode: Endpoint; readonly prefill: Endpoint | undefined }
  | Extract<ProfileRun, { ok: false }>;

/**
 * Decode endpoints ranked by the decode profile, each paired with the best prefill endpoint of its own PD group
 * (KV transfer only works inside a group). Decode endpoints whose group has no usable prefill are skipped and the
 * next-ranked ones fill the list, up to topN pairs; no pair at all is an error that says why.
 */
export function planPairs(input: PairPlanInput): PairPlan {
  const { cycle, pool } = input;
  const opts = (what: string, trace: RunOptions['trace'], where?: string): RunOptions => ({
    what,
    ...(where ? { where } : {}),
    ...(input.exclude ? { exclude: input.exclude } : {}),
    ...(trace ? { trace } : {}),
    ...(input.observer ? { observer: input.observer } : {}),
  });
  const decodeTrace = input.recorder?.begin('decode', undefined, pool.decode.items);
  const decodes = runProfile(cycle, input.decodeProfile, pool.decode.items, input.decodeBuffers, opts('decode', decodeTrace));
  if (!decodes.ok) return decodes;
  const pick = (count: number): number[] => {
    cycle.role = 'decode';
    const t0 = input.observer ? performance.now() : 0;
    const order = input.decodeProfile.picker.pick(cycle, { candidates: decodes.candidates, finals: decodes.finals, count }).order;
    if (input.observer) input.observer.pluginTime(input.decodeProfile.picker.name, 'picker', performance.now() - t0);
    return order;
  };
  let order = pick(input.topN);
  if (!input.withPrefill) {
    const attempts = order.map((i) => ({ endpoint: (decodes.candidates[i] as IndexedEndpoint).ref }));
    decodeTrace?.chose(order.map((i) => (decodes.candidates[i] as Endpoint).key));
    return { ok: true, attempts, decode: decodes.candidates[order[0] as number] as Endpoint, prefill: undefined };
  }

  const bestPrefill = new Map<string, IndexedEndpoint | undefined>();
  const whyNot = new Map<string, string>();
  const prefillFor = (group: string | undefined): IndexedEndpoint | undefined => {
    if (group === undefined) return undefined;
    if (bestPrefill.has(group)) return bestPrefill.get(group);
    const initial = pool.prefill(group);
    const trace = initial.length > 0 ? input.recorder?.begin('prefill', group, initial) : undefined;
    const run = runProfile(cycle, input.prefillProfile, initial, input.prefillBuffers, opts('prefill', trace, ` in PD group '${group}'`));
    let best: IndexedEndpoint | undefined;
    if (run.ok) {
      const t0 = input.observer ? performance.now() : 0;
      const first = input.prefillProfile.picker.pick(cycle, { candidates: run.candidates, finals: run.finals, count: 1 }).order[0] as number;
      if (input.observer) input.observer.pluginTime(input.prefillProfile.picker.name, 'picker', performance.now() - t0);
      best = run.candidates[first] as IndexedEndpoint;
      trace?.chose([best.key]);
    } else {
      whyNot.set(group, run.message);
    }
    bestPrefill.set(group, best);
    return best;
  };

  const attempts: Attempt[] = [];
  const decodeKeys: string[] = [];
  let first: { decode: Endpoint; prefill: Endpoint } | undefined;
  const tryFrom = (indices: readonly number[], skip: number): void => {
    for (let k = skip; k < indices.length && attempts.length < input.topN; k++) {
      const d = decodes.candidates[indices[k] as number] as IndexedEndpoint;
      const p = prefillFor(d.group);
      if (!p) continue;
      attempts.push({ endpoint: d.ref, prefill: p.ref });
      decodeKeys.push(d.key);
      first ??= { decode: d, prefill: p };
    }
  };
  tryFrom(order, 0);
  if (attempts.length < input.topN && order.length < decodes.candidates.length) {
    // Some top decodes had no prefill: walk further down the ranking (rare, so the full order is fine here).
    const seen = order.length;
    order = pick(decodes.candidates.length);
    tryFrom(order, seen);
  }
  decodeTrace?.chose(decodeKeys);
  if (!first) {
    const reasons = [...whyNot.values()];
    const detail = reasons.length > 0 ? `: ${reasons.slice(0, 3).join('; ')}` : ': no decode endpoint has a ready prefill endpoint in its PD group';
    return { ok: false, code: ErrorCode.SchedNoPrefillPair, message: `no valid prefill-decode pair${detail}` };
  }
  return { ok: true, attempts, decode: first.decode, prefill: first.prefill };
}
