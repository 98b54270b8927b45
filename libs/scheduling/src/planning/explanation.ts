import type { Explanation } from '@triad/bus';
import type { Candidates } from '../framework/candidates';
import type { ProfileRole } from '../framework/plugin';
import type { PickVerdict } from './pick-verdict';

type EndpointTrace = Explanation['profiles'][number]['endpoints'][number];

/** What happened to each endpoint in one profile run: which filter removed it, or its scores and final. */
export class ProfileTrace {
  readonly role: ProfileRole;
  readonly group: string | undefined;
  readonly #entries = new Map<string, EndpointTrace>();
  #chosen: string[] = [];
  #verdicts: PickVerdict[] = [];

  constructor(role: ProfileRole, group: string | undefined) {
    this.role = role;
    this.group = group;
  }

  /** Records the run's starting candidates. */
  start(c: Candidates): void {
    for (let i = 0; i < c.size; i++) {
      const key = c.endpoint(i).key;
      this.#entries.set(key, { key, scores: {}, final: 0 });
    }
  }

  /** Records the candidates a filter cleared in `keep` (call before the set is compacted). */
  filtered(by: string, c: Candidates, keep: Uint8Array): void {
    for (let i = 0; i < c.size; i++) {
      if (keep[i] === 1) continue;
      const entry = this.#entries.get(c.endpoint(i).key);
      if (entry && entry.filteredBy === undefined) entry.filteredBy = by;
    }
  }

  scored(scorer: string, c: Candidates, values: Float64Array): void {
    for (let i = 0; i < c.size; i++) {
      const entry = this.#entries.get(c.endpoint(i).key);
      if (entry) entry.scores[scorer] = values[i];
    }
  }

  finals(c: Candidates, finals: Float64Array): void {
    for (let i = 0; i < c.size; i++) {
      const entry = this.#entries.get(c.endpoint(i).key);
      if (entry) entry.final = finals[i];
    }
  }

  chose(keys: readonly string[]): void {
    this.#chosen = [...keys];
  }

  /** Why the run's first choice won (one verdict per pick; an encode run places one item per pick). */
  judged(verdict: PickVerdict): void {
    this.#verdicts.push(verdict);
  }

  /** The trace, chosen endpoints first (in order), then the rest by final score, then the filtered ones. */
  render(limit: number): Explanation['profiles'][number] {
    const chosen = this.#chosen.map((k) => this.#entries.get(k)).filter((e): e is EndpointTrace => !!e);
    const chosenSet = new Set(this.#chosen);
    const rest = [...this.#entries.values()].filter((e) => !chosenSet.has(e.key));
    rest.sort(
      (a, b) =>
        (a.filteredBy === undefined ? 0 : 1) - (b.filteredBy === undefined ? 0 : 1) || b.final - a.final || (a.key < b.key ? -1 : 1),
    );
    const out: Explanation['profiles'][number] = { profile: this.role, endpoints: [...chosen, ...rest].slice(0, limit) };
    if (this.group !== undefined) out.group = this.group;
    if (this.#verdicts.length > 0) {
      out.decider = this.#verdicts.map((v) => v.decider);
      const overruled = [...new Set(this.#verdicts.flatMap((v) => v.overruled))];
      if (overruled.length > 0) out.overruledByLoad = overruled;
    }
    return out;
  }
}

/** Collects the traces of one request's profile runs when the request asked for an explanation. */
export class ExplanationRecorder {
  readonly #traces: ProfileTrace[] = [];

  begin(role: ProfileRole, group: string | undefined): ProfileTrace {
    const trace = new ProfileTrace(role, group);
    this.#traces.push(trace);
    return trace;
  }

  render(limit: number): Explanation {
    return { profiles: this.#traces.map((t) => t.render(limit)) };
  }
}
