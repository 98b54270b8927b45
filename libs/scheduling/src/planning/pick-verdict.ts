import type { LoadedProfile } from '../config/load-config';
import type { PickResult, ProfileRole } from '../framework/plugin';
import type { Cycle } from './cycle';
import type { ProfileRun, ProfileSlot } from './profile-run';

/** The pick had one candidate left after the filters: no scorer decided it. */
export const ONLY_CANDIDATE = 'only-candidate';
/** The chosen endpoint and the runner-up had the same final score: the picker's tie-break decided. */
export const TIE_BREAK = 'tie-break';

/**
 * Why one profile run's first choice won, for quality metrics and explanations.
 * - `decider`: the scorer whose weighted score gave the chosen endpoint its largest lead over the runner-up (the
 *   best other candidate), `only-candidate`, `tie-break`, or the picker's name when the picker placed by content
 *   affinity itself (encoder-affinity).
 * - `overruled`: affinity scorers (or the affinity picker) that wanted another endpoint and were stopped by their
 *   load bound: they took their score from a candidate past the bound, and the chosen one got none from them.
 */
export interface PickVerdict {
  readonly profile: ProfileRole;
  readonly decider: string;
  readonly overruled: readonly string[];
  /** The profile's load-bounded affinity scorers (or its affinity picker): those that could have been overruled. */
  readonly affinity: readonly string[];
}

const NONE: readonly string[] = [];

/** The verdict on the first choice `chosen` (a candidate index) of a run scored with per-scorer columns kept. */
export function judgePick(
  cycle: Cycle,
  profile: LoadedProfile,
  run: Extract<ProfileRun, { ok: true }>,
  slot: ProfileSlot,
  chosen: number,
  picked: PickResult,
): PickVerdict {
  const role = profile.role;
  // A picker that places by content affinity (encoder-affinity) says whether the item got its home endpoint.
  if (picked.affinity !== undefined) {
    const affinity = [profile.picker.name];
    return { profile: role, decider: profile.picker.name, overruled: picked.affinity ? NONE : affinity, affinity };
  }
  const affinity = affinityScorersOf(profile);
  const n = run.candidates.size;
  const columns = slot.columns;
  const overruled = overruledAt(cycle, profile, columns, n, chosen);
  if (n <= 1) return { profile: role, decider: ONLY_CANDIDATE, overruled, affinity };
  const finals = run.finals;
  let runnerUp = -1;
  for (let i = 0; i < n; i++) {
    if (i === chosen) continue;
    if (runnerUp < 0 || finals[i] > finals[runnerUp]) runnerUp = i;
  }
  if (finals[chosen] <= finals[runnerUp]) return { profile: role, decider: TIE_BREAK, overruled, affinity };
  let decider = TIE_BREAK;
  let lead = 0;
  profile.scorers.forEach(({ scorer, weight }, s) => {
    const d = weight * (columns[s * n + chosen] - columns[s * n + runnerUp]);
    if (d > lead) {
      lead = d;
      decider = scorer.name;
    }
  });
  return { profile: role, decider, overruled, affinity };
}

const affinityOf = new WeakMap<LoadedProfile, readonly string[]>();

/** The load-bounded affinity scorers of a profile (computed once per loaded profile). */
function affinityScorersOf(profile: LoadedProfile): readonly string[] {
  let names = affinityOf.get(profile);
  if (names === undefined) {
    names = profile.scorers.filter(({ scorer }) => scorer.loadBoundedAffinity === true).map(({ scorer }) => scorer.name);
    affinityOf.set(profile, names);
  }
  return names;
}

function overruledAt(cycle: Cycle, profile: LoadedProfile, columns: Float64Array, n: number, chosen: number): readonly string[] {
  if (cycle.bounded.size === 0) return NONE;
  const out: string[] = [];
  profile.scorers.forEach(({ scorer }, s) => {
    if (cycle.bounded.has(scorer.name) && columns[s * n + chosen] === 0) out.push(scorer.name);
  });
  return out;
}
