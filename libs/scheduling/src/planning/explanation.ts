import type { Explanation } from '@triad/bus';
import type { ProfileRole } from '../framework/plugin';
import type { Endpoint } from '../state/endpoint';

type EndpointTrace = Explanation['profiles'][number]['endpoints'][number];

/** What happened to each endpoint in one profile run: which filter removed it, or its scores and final. */
export class ProfileTrace {
  readonly role: ProfileRole;
  readonly group: string | undefined;
  readonly #entries = new Map<string, EndpointTrace>();
  #chosen: string[] = [];

  constructor(role: ProfileRole, group: string | undefined, candidates: readonly Endpoint[]) {
    this.role = role;
    this.group = group;
    for (const e of candidates) this.#entries.set(e.key, { key: e.key, scores: {}, final: 0 });
  }

  filtered(by: string, before: readonly Endpoint[], after: readonly Endpoint[]): void {
    if (before === after) return;
    const kept = new Set(after.map((e) => e.key));
    for (const e of before) {
      const entry = this.#entries.get(e.key);
      if (entry && !kept.has(e.key) && entry.filteredBy === undefined) entry.filteredBy = by;
    }
  }

  scored(scorer: string, candidates: readonly Endpoint[], values: Float64Array): void {
    for (let i = 0; i < candidates.length; i++) {
      const entry = this.#entries.get((candidates[i] as Endpoint).key);
      if (entry) entry.scores[scorer] = values[i] as number;
    }
  }

  finals(candidates: readonly Endpoint[], finals: Float64Array): void {
    for (let i = 0; i < candidates.length; i++) {
      const entry = this.#entries.get((candidates[i] as Endpoint).key);
      if (entry) entry.final = finals[i] as number;
    }
  }

  chose(keys: readonly string[]): void {
    this.#chosen = [...keys];
  }

  /** The trace, chosen endpoints first (in order), then the rest by final score, then the filtered ones. */
  render(limit: number): Explanation['profiles'][number] {
    const chosen = this.#chosen.map((k) => this.#entries.get(k)).filter((e): e is EndpointTrace => !!e);
    const chosenSet = new Set(this.#chosen);
    const rest = [...this.#entries.values()].filter((e) => !chosenSet.has(e.key));
    rest.sort((a, b) => (a.filteredBy === undefined ? 0 : 1) - (b.filteredBy === undefined ? 0 : 1) || b.final - a.final || (a.key < b.key ? -1 : 1));
    const out: Explanation['profiles'][number] = { profile: this.role, endpoints: [...chosen, ...rest].slice(0, limit) };
    if (this.group !== undefined) out.group = this.group;
    return out;
  }
}

/** Collects the traces of one request's profile runs when the request asked for an explanation. */
export class ExplanationRecorder {
  readonly #traces: ProfileTrace[] = [];

  begin(role: ProfileRole, group: string | undefined, candidates: readonly Endpoint[]): ProfileTrace {
    const trace = new ProfileTrace(role, group, candidates);
    this.#traces.push(trace);
    return trace;
  }

  render(limit: number): Explanation {
    return { profiles: this.#traces.map((t) => t.render(limit)) };
  }
}
