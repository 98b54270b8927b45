import type { PickVerdict, SchedulingObserver } from '@triad/scheduling';

type ProfileRole = PickVerdict['profile'];

/** One profile's pick verdicts: how many picks, which scorer decided each, which affinity load overruled. */
export interface ProfilePicks {
  picks: number;
  readonly decider: Record<string, number>;
  readonly overruled: Record<string, number>;
}

/**
 * Counts the scheduler's pick verdicts per profile over a simulated run, as the scheduler service's
 * `/debug/pick-quality` does over a process benchmark cell (every decision judged, warm-up included).
 */
export class PickCounts implements SchedulingObserver {
  readonly profiles: Partial<Record<ProfileRole, ProfilePicks>> = {};

  pluginTime(): void {}

  picked(verdicts: readonly PickVerdict[]): void {
    for (const v of verdicts) {
      const p = (this.profiles[v.profile] ??= { picks: 0, decider: {}, overruled: {} });
      p.picks++;
      p.decider[v.decider] = (p.decider[v.decider] ?? 0) + 1;
      for (const s of v.overruled) p.overruled[s] = (p.overruled[s] ?? 0) + 1;
    }
  }

  /** Picks of `profile` decided by `scorer`, and those where its affinity was overruled by load. */
  of(profile: ProfileRole, scorer: string): { picks: number; decided: number; overruled: number } {
    const p = this.profiles[profile];
    return { picks: p?.picks ?? 0, decided: p?.decider[scorer] ?? 0, overruled: p?.overruled[scorer] ?? 0 };
  }
}
