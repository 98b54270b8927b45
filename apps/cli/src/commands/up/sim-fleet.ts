import type { SimSpec } from './sim-plan';

/** A running engine sim, as the sim library returns it. */
export interface RunningSim {
  readonly url: string;
  close(): Promise<void>;
}

export interface FleetEvents {
  started(spec: SimSpec, sim: RunningSim): void;
  stopped(spec: SimSpec): void;
  failed(spec: SimSpec, err: Error): void;
}

interface Member {
  readonly spec: SimSpec;
  readonly sim: RunningSim;
  /** Set while a removed pod's sim drains before it closes. */
  drainTimer?: NodeJS.Timeout;
}

const sameSpec = (a: SimSpec, b: SimSpec): boolean => JSON.stringify(a) === JSON.stringify(b);

/**
 * The engine sims of one `triad up`, kept equal to the latest plan: new pods get a sim, changed pods get a fresh
 * one, and a removed pod's sim closes after `drainMs` (like a deleted pod's grace period), so requests the router
 * sent before it noticed the removal still finish.
 */
export class SimFleet {
  private readonly members = new Map<string, Member>();

  constructor(
    private readonly start: (spec: SimSpec) => Promise<RunningSim>,
    private readonly events: FleetEvents,
    private readonly drainMs: number,
  ) {}

  /** Applies a plan; resolves once every new sim listens. Returns the sims that failed to start. */
  async apply(plan: readonly SimSpec[]): Promise<SimSpec[]> {
    const wanted = new Map(plan.map((s) => [s.key, s]));
    const closing: Promise<void>[] = [];
    for (const [key, member] of this.members) {
      const next = wanted.get(key);
      if (next && sameSpec(next, member.spec)) {
        // Back in the plan while draining: keep serving.
        if (member.drainTimer) clearTimeout(member.drainTimer);
        delete member.drainTimer;
      } else if (next) {
        // Same pod, different role/port/model: the old sim must free its address before the new one binds it.
        this.members.delete(key);
        closing.push(this.close(member));
      } else if (!member.drainTimer) {
        member.drainTimer = setTimeout(() => {
          if (this.members.get(key) === member) this.members.delete(key);
          void this.close(member);
        }, this.drainMs);
      }
    }
    await Promise.all(closing);
    const toStart = plan.filter((s) => !this.members.has(s.key));
    const results = await Promise.all(
      toStart.map(async (spec) => {
        try {
          const sim = await this.start(spec);
          this.members.set(spec.key, { spec, sim });
          this.events.started(spec, sim);
          return undefined;
        } catch (err) {
          this.events.failed(spec, err as Error);
          return spec;
        }
      }),
    );
    return results.filter((s): s is SimSpec => s !== undefined);
  }

  /** Keys of the sims running now (draining ones included). */
  keys(): string[] {
    return [...this.members.keys()];
  }

  async closeAll(): Promise<void> {
    const all = [...this.members.values()];
    this.members.clear();
    await Promise.all(all.map((m) => this.close(m)));
  }

  private async close(member: Member): Promise<void> {
    if (member.drainTimer) clearTimeout(member.drainTimer);
    try {
      await member.sim.close();
    } finally {
      this.events.stopped(member.spec);
    }
  }
}
