import type { Attempt } from '@triad/bus';
import { ErrorCode } from '@triad/errors';
import type { LoadedProfile } from '../config/load-config';
import type { Endpoint, IndexedEndpoint } from '../state/endpoint';
import type { ModelServerPool } from '../state/model-server-pool';
import type { Cycle } from './cycle';
import type { ExplanationRecorder } from './explanation';
import { runProfile, timedPick, type ProfileRun, type ProfileSlot, type Timing } from './profile-run';

export interface PairPlanInput {
  readonly cycle: Cycle;
  readonly decodeProfile: LoadedProfile;
  readonly prefillProfile: LoadedProfile;
  readonly pool: ModelServerPool;
  /** False for E→PD (no prefill labels): attempts are decode endpoints alone. */
  readonly withPrefill: boolean;
  readonly topN: number;
  readonly decodeSlot: ProfileSlot;
  readonly prefillSlot: ProfileSlot;
  readonly exclude: ReadonlySet<string> | undefined;
  readonly recorder: ExplanationRecorder | undefined;
  readonly timing: Timing | undefined;
}

export type PairPlan =
  | { readonly ok: true; readonly attempts: Attempt[]; readonly decode: Endpoint; readonly prefill: Endpoint | undefined }
  | Extract<ProfileRun, { ok: false }>;

function pickFrom(
  input: PairPlanInput, profile: LoadedProfile, run: Extract<ProfileRun, { ok: true }>, count: number, group?: string,
): number[] {
  return timedPick(input.cycle, profile, { candidates: run.candidates, finals: run.finals, count }, input.timing, group).order;
}

/**
 * Decode endpoints ranked by the decode profile, each paired with the best prefill endpoint of its own PD group
 * (KV transfer only works inside a group). Decode endpoints whose group has no usable prefill are skipped and the
 * next-ranked ones fill the list, up to topN pairs; no pair at all is an error that says why.
 */
export function planPairs(input: PairPlanInput): PairPlan {
  const { cycle, pool } = input;
  const common = { exclude: input.exclude, recorder: input.recorder, timing: input.timing };
  const decodes = runProfile(cycle, input.decodeProfile, pool.decode, input.decodeSlot, { what: 'decode', ...common });
  if (!decodes.ok) return decodes;
  const decodeAt = (i: number): IndexedEndpoint => decodes.candidates.endpoint(i);
  let order = pickFrom(input, input.decodeProfile, decodes, input.topN);
  if (!input.withPrefill) {
    decodes.trace?.chose(order.map((i) => decodeAt(i).key));
    return {
      ok: true, attempts: order.map((i) => ({ endpoint: decodeAt(i).ref })), decode: decodeAt(order[0] as number), prefill: undefined,
    };
  }

  // The best prefill per group, computed once per group this request touches.
  const bestPrefill = new Map<string, IndexedEndpoint | undefined>();
  const whyNot: string[] = [];
  const prefillFor = (group: string | undefined): IndexedEndpoint | undefined => {
    if (group === undefined) return undefined;
    if (bestPrefill.has(group)) return bestPrefill.get(group);
    const run = runProfile(
      cycle, input.prefillProfile, pool.prefill(group), input.prefillSlot,
      { what: 'prefill', where: ` in PD group '${group}'`, group, ...common },
    );
    let best: IndexedEndpoint | undefined;
    if (run.ok) {
      best = run.candidates.endpoint(pickFrom(input, input.prefillProfile, run, 1, group)[0] as number);
      run.trace?.chose([best.key]);
    } else {
      whyNot.push(run.message);
    }
    bestPrefill.set(group, best);
    return best;
  };

  const attempts: Attempt[] = [];
  const decodeKeys: string[] = [];
  let first: { decode: Endpoint; prefill: Endpoint } | undefined;
  const pairFrom = (indices: readonly number[], skip: number): void => {
    for (let k = skip; k < indices.length && attempts.length < input.topN; k++) {
      const d = decodeAt(indices[k] as number);
      const p = prefillFor(d.group);
      if (!p) continue;
      attempts.push({ endpoint: d.ref, prefill: p.ref });
      decodeKeys.push(d.key);
      first ??= { decode: d, prefill: p };
    }
  };
  pairFrom(order, 0);
  if (attempts.length < input.topN && order.length < decodes.candidates.size) {
    // Some top decodes had no prefill: walk further down the ranking (rare, so the full order is fine here).
    const seen = order.length;
    order = pickFrom(input, input.decodeProfile, decodes, decodes.candidates.size);
    pairFrom(order, seen);
  }
  decodes.trace?.chose(decodeKeys);
  if (!first) {
    const detail = whyNot.length > 0
      ? `: ${whyNot.slice(0, 3).join('; ')}` : ': no decode endpoint has a ready prefill endpoint in its PD group';
    return { ok: false, code: ErrorCode.SchedNoPrefillPair, message: `no valid prefill-decode pair${detail}` };
  }
  return { ok: true, attempts, decode: first.decode, prefill: first.prefill };
}
