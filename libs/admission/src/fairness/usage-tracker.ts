/** Kthena's fairness weights: priority = tokenWeight × (in×inW + out×outW) + requestWeight × requests. */
export interface PriorityWeights {
  readonly inputTokenWeight: number;
  readonly outputTokenWeight: number;
  readonly priorityTokenWeight: number;
  readonly priorityRequestNumWeight: number;
}

interface Bucket {
  sec: number;
  input: number;
  output: number;
  requests: number;
}

interface Series {
  buckets: Bucket[];
  head: number;
  input: number;
  output: number;
  requests: number;
}

/**
 * Each user's token usage per model over a sliding window, in one-second buckets with running sums (as Kthena's
 * tracker). Only seconds with traffic take memory. Fed with the actual usage of every finished request, in
 * every mode (aggregated, PD, EPD), by the admission facade's release.
 */
export class UsageTracker {
  #windowSec: number;
  readonly #now: () => number;
  readonly #series = new Map<string, Series>();
  #recordsSincePrune = 0;

  constructor(windowMs: number, now: () => number) {
    this.#windowSec = Math.max(1, Math.round(windowMs / 1000));
    this.#now = now;
  }

  set windowMs(ms: number) {
    this.#windowSec = Math.max(1, Math.round(ms / 1000));
  }

  record(model: string, user: string | undefined, input: number, output: number): void {
    if (user === undefined) return;
    const key = `${model}\u0000${user}`;
    const sec = Math.floor(this.#now() / 1000);
    let s = this.#series.get(key);
    if (!s) {
      s = { buckets: [], head: 0, input: 0, output: 0, requests: 0 };
      this.#series.set(key, s);
    }
    this.#evict(s, sec);
    const last = s.buckets[s.buckets.length - 1];
    const bucket = last && last.sec === sec ? last : { sec, input: 0, output: 0, requests: 0 };
    if (bucket !== last) s.buckets.push(bucket);
    bucket.input += input;
    bucket.output += output;
    bucket.requests += 1;
    s.input += input;
    s.output += output;
    s.requests += 1;
    if (++this.#recordsSincePrune >= 1024) this.prune();
  }

  usage(model: string, user: string): { input: number; output: number; requests: number } {
    const s = this.#series.get(`${model}\u0000${user}`);
    if (!s) return { input: 0, output: 0, requests: 0 };
    this.#evict(s, Math.floor(this.#now() / 1000));
    return { input: s.input, output: s.output, requests: s.requests };
  }

  /** Lower goes first; a request without a user goes last (Infinity), as in Kthena. */
  priority(model: string, user: string | undefined, w: PriorityWeights): number {
    if (user === undefined) return Infinity;
    const u = this.usage(model, user);
    return (
      w.priorityTokenWeight * (u.input * w.inputTokenWeight + u.output * w.outputTokenWeight) + w.priorityRequestNumWeight * u.requests
    );
  }

  /** Drops users with nothing left in the window. */
  prune(): void {
    this.#recordsSincePrune = 0;
    const sec = Math.floor(this.#now() / 1000);
    for (const [key, s] of this.#series) {
      this.#evict(s, sec);
      if (s.requests === 0 && s.input === 0 && s.output === 0) this.#series.delete(key);
    }
  }

  get users(): number {
    return this.#series.size;
  }

  #evict(s: Series, sec: number): void {
    const oldest = sec - this.#windowSec;
    while (s.head < s.buckets.length && s.buckets[s.head].sec <= oldest) {
      const b = s.buckets[s.head];
      s.input -= b.input;
      s.output -= b.output;
      s.requests -= b.requests;
      s.head++;
    }
    // Compact now and then so the array does not grow without bound.
    if (s.head > 64 && s.head * 2 > s.buckets.length) {
      s.buckets = s.buckets.slice(s.head);
      s.head = 0;
    }
  }
}
