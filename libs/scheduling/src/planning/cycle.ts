import type { SchedulingRequest } from '@triad/bus';
import type { EjectionPolicy, OutlierTable } from '../state/outlier-table';
import type { CycleContext, ProfileRole } from '../framework/plugin';
import { hashString32 } from '../hashing/fast-hash';

/** The one mutable context of a scheduler, reset for each request and each profile run. */
export class Cycle implements CycleContext {
  request!: SchedulingRequest;
  now = 0;
  seed = 0;
  role: ProfileRole = 'aggregated';
  /** Shared outlier state, when the process follows it; ejected endpoints leave each stage's candidates first. */
  outliers: OutlierTable | undefined = undefined;
  /** The ModelServer's ejection ceiling and panic threshold for this request; undefined when detection is off. */
  ejection: EjectionPolicy | undefined = undefined;
  /** Affinity scorers whose load bound removed a candidate's score in the current profile run. */
  readonly bounded = new Set<string>();
  /** Set for each profile run and around each post-schedule hook call (see CycleContext.encodesMedia). */
  encodesMedia = true;

  loadBounded(scorer: string): void {
    this.bounded.add(scorer);
  }

  begin(request: SchedulingRequest, now: number): void {
    this.request = request;
    this.now = now;
    this.seed = hashString32(request.id);
    this.encodesMedia = true;
  }
}
