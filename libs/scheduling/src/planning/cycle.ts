import type { SchedulingRequest } from '@triad/bus';
import type { CycleContext, ProfileRole } from '../framework/plugin';
import { hashString32 } from '../hashing/fast-hash';

/** The one mutable context of a scheduler, reset for each request and each profile run. */
export class Cycle implements CycleContext {
  request!: SchedulingRequest;
  now = 0;
  seed = 0;
  role: ProfileRole = 'aggregated';

  begin(request: SchedulingRequest, now: number): void {
    this.request = request;
    this.now = now;
    this.seed = hashString32(request.id);
  }
}
