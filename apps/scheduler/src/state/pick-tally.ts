import type { PickVerdict } from '@triad/scheduling';

/** Counts per profile, then per scorer (or `tie-break`, `only-candidate`, an affinity picker). */
type Counts = Map<string, Map<string, number>>;

/** What `/debug/pick-quality` shows: per profile, picks, who decided them and the affinity the load bound overruled. */
export interface PickQualityView {
  readonly profiles: Record<string, { picks: number; decider: Record<string, number>; overruledByLoad: Record<string, number> }>;
}

function add(counts: Counts, profile: string, key: string, n: number): void {
  let byKey = counts.get(profile);
  if (!byKey) counts.set(profile, (byKey = new Map()));
  byKey.set(key, (byKey.get(key) ?? 0) + n);
}

const bump = (counts: Counts, profile: string, key: string): void => add(counts, profile, key, 1);

/**
 * Running totals of the scheduler's pick verdicts since the process started: which scorer decided each profile's
 * first choice, and how often an affinity scorer's choice was overruled by its load bound. Read by the metrics at
 * scrape time and by the debug route, so a decision costs two map updates per profile.
 */
export class PickTally {
  readonly decider: Counts = new Map();
  readonly overruled: Counts = new Map();

  add(verdicts: readonly PickVerdict[]): void {
    for (const v of verdicts) {
      bump(this.decider, v.profile, v.decider);
      // Every affinity that could have been overruled is listed (at 0 until it is), so a rate reads 0, not no data.
      for (const scorer of v.affinity) add(this.overruled, v.profile, scorer, 0);
      for (const scorer of v.overruled) bump(this.overruled, v.profile, scorer);
    }
  }

  view(): PickQualityView {
    const profiles: PickQualityView['profiles'] = {};
    for (const [profile, byDecider] of this.decider) {
      const decider = Object.fromEntries(byDecider);
      const picks = [...byDecider.values()].reduce((a, b) => a + b, 0);
      profiles[profile] = { picks, decider, overruledByLoad: Object.fromEntries(this.overruled.get(profile) ?? []) };
    }
    return { profiles };
  }
}
