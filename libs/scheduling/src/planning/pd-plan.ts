import type { Attempt } from '@triad/bus';
import { ErrorCode } from '@triad/errors';
import type { LoadedProfile } from '../config/load-config';
import type { Endpoint, IndexedEndpoint } from '../state/endpoint';
import type { ModelServerPool } from '../state/model-server-pool';
import type { Cycle } from './cycle';
import type { ExplanationRecorder } from './explanation';
import { judgePick, type PickVerdict } from './pick-verdict';
import { runProfile, timedPick, type ProfileRun, type ProfileSlot, type Timing } from './profile-run';

export interface PairPlanInput {
  readonly cycle: Cycle;
  readonly decodeProfile: LoadedProfile;
  readonly prefillProfile: LoadedProfile;
  readonly pool: ModelServerPool;
  /** False for E→PD (no prefill labels): attempts are decode endpoints alone. */
  readonly withPrefill: boolean;
  /**
   * Whether the chosen decode pod could encode the request's media (`CycleContext.encodesMedia` of the decode run):
   * false when a prefill pod will, the request being unable to skip its prefill leg.
   */
  readonly decodeEncodesMedia: boolean;
  readonly topN: number;
  readonly decodeSlot: ProfileSlot;
  readonly prefillSlot: ProfileSlot;
  readonly exclude: ReadonlySet<string> | undefined;
  readonly recorder: ExplanationRecorder | undefined;
  readonly timing: Timing | undefined;
  /**
   * When set, the decode pick and the first pair's prefill pick are judged and their verdicts pushed here (only the
   * chosen prefill group's run is judged, not every group the alternates touch).
   */
  readonly verdicts?: PickVerdict[] | undefined;
  /**
   * Stage fallback: when no decode has a usable prefill, answer with the decode ranking alone (`prefillFellBack`),
   * from the same decode run, instead of failing with SCHED_NO_PREFILL_PAIR.
   */
  readonly decodeOnlyFallback?: boolean | undefined;
}

export type PairPlan =
  | {
      readonly ok: true;
      readonly attempts: Attempt[];
      readonly decode: Endpoint;
      readonly prefill: Endpoint | undefined;
      /** Every prefill of the chosen decode's group is ejected (the stage has no healthy endpoint there). */
      readonly prefillsAllEjected: boolean;
      /** No decode had a usable prefill and `decodeOnlyFallback` was set: the attempts are decode endpoints alone. */
      readonly prefillFellBack: boolean;
    }
  | Extract<ProfileRun, { ok: false }>;

function pickFrom(
  input: PairPlanInput,
  profile: LoadedProfile,
  run: Extract<ProfileRun, { ok: true }>,
  count: number,
  group?: string,
  slot?: ProfileSlot,
): { order: number[]; verdict: PickVerdict | undefined } {
  const picked = timedPick(input.cycle, profile, { candidates: run.candidates, finals: run.finals, count }, input.timing, group);
  // Judged right after the run's own pick: the next profile run reuses the cycle's load-bound record.
  const verdict = slot && input.verdicts ? judgePick(input.cycle, profile, run, slot, picked.order[0], picked) : undefined;
  if (verdict) run.trace?.judged(verdict);
  return { order: picked.order, verdict };
}

/**
 * Decode endpoints ranked by the decode profile, each paired with a prefill endpoint of its own PD group (KV
 * transfer only works inside a group), up to topN pairs. The alternates move away from both pods of the first
 * choice where they can, so a retry after a failing prefill does not land on it again: the first pass pairs the
 * ranked decodes with their group's ranked prefills in turn (the k-th decode of a group gets the group's k-th best
 * prefill, wrapping), and a second pass adds the remaining pairs (each decode with its group's other prefills, in
 * rank order). Decode endpoints whose group has no usable prefill are skipped; no pair at all is an error that
 * says why.
 */
export function planPairs(input: PairPlanInput): PairPlan {
  const { cycle, pool } = input;
  const judging = input.verdicts !== undefined;
  const decodes = runProfile(cycle, input.decodeProfile, pool.decode, input.decodeSlot, {
    what: 'decode',
    exclude: input.exclude,
    recorder: input.recorder,
    timing: input.timing,
    judge: judging,
    encodesMedia: input.decodeEncodesMedia,
  });
  if (!decodes.ok) return decodes;
  const decodePick = pickFrom(input, input.decodeProfile, decodes, input.topN, undefined, input.decodeSlot);
  if (!input.withPrefill) return decodeOnly(input, decodes, decodePick, false);
  // The pairing's state lives in an object, not in closures: a function made per decision is named at run time
  // under esbuild's keepNames (one defineProperty each), which cost more than the pairing itself.
  const pairs = new Pairing(input, decodes);
  let order = decodePick.order;
  pairs.firstPass(order, 0);
  const attempts = pairs.attempts;
  if (attempts.length < input.topN && order.length < decodes.candidates.size) {
    // Some top decodes had no prefill: walk further down the ranking (rare, so the full order is fine here).
    const seen = order.length;
    order = pickFrom(input, input.decodeProfile, decodes, decodes.candidates.size).order;
    pairs.firstPass(order, seen);
  }
  if (attempts.length < input.topN && pairs.first !== undefined) pairs.addRemainingPairs(order);
  decodes.trace?.chose(pairs.decodeKeys);
  // Then the last resorts, least recently failed first: the paired decodes with their group's ejected
  // prefills, then the ejected decodes with their group's best prefill.
  if (pairs.ejectedPrefills.size > 0) {
    for (const d of [...pairs.pairedDecodes]) {
      for (const p of pairs.ejectedPrefills.get(d.group as string) ?? NONE) {
        if (attempts.length >= input.topN) break;
        pairs.add(d, p);
      }
    }
  }
  for (const d of decodes.lastResort) {
    if (attempts.length >= input.topN) break;
    const prefills = pairs.prefillsOf(d.group);
    if (prefills.length > 0) pairs.add(d, prefills[0]);
  }
  const first = pairs.first;
  if (!first) {
    if (input.decodeOnlyFallback === true) return decodeOnly(input, decodes, decodePick, true);
    const whyNot = pairs.whyNot;
    const detail =
      whyNot.length > 0 ? `: ${whyNot.slice(0, 3).join('; ')}` : ': no decode endpoint has a ready prefill endpoint in its PD group';
    return { ok: false, code: ErrorCode.SchedNoPrefillPair, message: `no valid prefill-decode pair${detail}` };
  }
  if (decodePick.verdict) input.verdicts?.push(decodePick.verdict);
  if (pairs.prefillVerdict) input.verdicts?.push(pairs.prefillVerdict);
  const group = first.decode.group;
  return {
    ok: true,
    attempts,
    decode: first.decode,
    prefill: first.prefill,
    prefillsAllEjected: group !== undefined && pairs.allEjectedGroups.has(group),
    prefillFellBack: false,
  };
}

type DecodeRun = Extract<ProfileRun, { ok: true }>;

/** The decode ranking alone: E→PD, or the stage fallback when no decode has a usable prefill. */
function decodeOnly(
  input: PairPlanInput,
  decodes: DecodeRun,
  decodePick: { order: number[]; verdict: PickVerdict | undefined },
  prefillFellBack: boolean,
): PairPlan {
  if (decodePick.verdict) input.verdicts?.push(decodePick.verdict);
  const topOrder = decodePick.order;
  decodes.trace?.chose(topOrder.map((i) => decodes.candidates.endpoint(i).key));
  const attempts: Attempt[] = topOrder.map((i) => ({ endpoint: decodes.candidates.endpoint(i).ref }));
  for (const d of decodes.lastResort) if (attempts.length < input.topN) attempts.push({ endpoint: d.ref });
  return {
    ok: true,
    attempts,
    decode: decodes.candidates.endpoint(topOrder[0]),
    prefill: undefined,
    prefillsAllEjected: false,
    prefillFellBack,
  };
}

/** The pairs of one decision being built: the decode ranking walked against each group's ranked prefills. */
class Pairing {
  readonly attempts: Attempt[] = [];
  readonly decodeKeys: string[] = [];
  /** The decodes paired so far, in rank order (the endpoints of decodeKeys). */
  readonly pairedDecodes: IndexedEndpoint[] = [];
  /** Pairs handed out per group in the first pass (which prefill the group's next decode gets). */
  readonly #turn = new Map<string, number>();
  first: { decode: Endpoint; prefill: Endpoint } | undefined;
  // The ranked healthy prefills per group (up to topN), computed once per group this request touches; the
  // group's ejected prefills are kept apart, so the rotation of the first pass never hands one out while a
  // healthy pair is left (they pair only after every healthy pair).
  readonly #rankedPrefills = new Map<string, readonly IndexedEndpoint[]>();
  readonly ejectedPrefills = new Map<string, readonly IndexedEndpoint[]>();
  readonly allEjectedGroups = new Set<string>();
  // The first group with a usable prefill gives the first pair (the decision's prefill): only its pick is judged.
  #prefillChosen = false;
  prefillVerdict: PickVerdict | undefined;
  readonly whyNot: string[] = [];

  constructor(
    readonly input: PairPlanInput,
    readonly decodes: DecodeRun,
  ) {}

  prefillsOf(group: string | undefined): readonly IndexedEndpoint[] {
    if (group === undefined) return NONE;
    const known = this.#rankedPrefills.get(group);
    if (known !== undefined) return known;
    const input = this.input;
    const judge = input.verdicts !== undefined && !this.#prefillChosen;
    const run = runProfile(input.cycle, input.prefillProfile, input.pool.prefill(group), input.prefillSlot, {
      what: 'prefill',
      where: ` in PD group '${group}'`,
      group,
      exclude: input.exclude,
      recorder: input.recorder,
      timing: input.timing,
      judge,
    });
    let ranked: readonly IndexedEndpoint[] = NONE;
    if (run.ok) {
      const pick = pickFrom(input, input.prefillProfile, run, input.topN, group, judge ? input.prefillSlot : undefined);
      this.#prefillChosen = true;
      if (pick.verdict) this.prefillVerdict = pick.verdict;
      const picked = pick.order.map((i) => run.candidates.endpoint(i));
      run.trace?.chose(picked.map((e) => e.key));
      ranked = picked;
      if (run.lastResort.length > 0) this.ejectedPrefills.set(group, run.lastResort);
      if (run.allEjected) this.allEjectedGroups.add(group);
    } else {
      this.whyNot.push(run.message);
    }
    this.#rankedPrefills.set(group, ranked);
    return ranked;
  }

  add(d: IndexedEndpoint, p: IndexedEndpoint): void {
    this.attempts.push({ endpoint: d.ref, prefill: p.ref });
    if (!this.decodeKeys.includes(d.key)) {
      this.decodeKeys.push(d.key);
      this.pairedDecodes.push(d);
    }
    this.first ??= { decode: d, prefill: p };
  }

  firstPass(indices: readonly number[], skip: number): void {
    const topN = this.input.topN;
    for (let k = skip; k < indices.length && this.attempts.length < topN; k++) {
      const d = this.decodes.candidates.endpoint(indices[k]);
      const prefills = this.prefillsOf(d.group);
      if (prefills.length === 0) continue;
      const t = this.#turn.get(d.group as string) ?? 0;
      this.#turn.set(d.group as string, t + 1);
      this.add(d, prefills[t % prefills.length]);
    }
  }

  /**
   * Second pass: the paired decodes, in rank order, with each prefill of their group not yet paired with them,
   * until topN pairs (e.g. one decode and two prefills give both pairs; two and two give all four).
   */
  addRemainingPairs(order: readonly number[]): void {
    const attempts = this.attempts;
    const topN = this.input.topN;
    // The pairs of the first pass (topN at most): looked through, not joined into keys and hashed.
    const paired = attempts.length;
    for (const i of order) {
      const d = this.decodes.candidates.endpoint(i);
      if (!this.decodeKeys.includes(d.key)) continue;
      for (const p of this.prefillsOf(d.group)) {
        if (attempts.length >= topN) return;
        if (!hasPair(attempts, paired, d.key, p.key)) this.add(d, p);
      }
    }
  }
}

/** Whether one of the first `count` attempts pairs decode `decode` with prefill `prefill`. */
function hasPair(attempts: readonly Attempt[], count: number, decode: string, prefill: string): boolean {
  for (let i = 0; i < count; i++) if (attempts[i].endpoint.key === decode && attempts[i].prefill?.key === prefill) return true;
  return false;
}

const NONE: readonly IndexedEndpoint[] = [];
