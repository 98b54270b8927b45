/** A leg that carried prompt tokens to an endpoint and has not finished. */
interface OpenLeg {
  readonly endpoint: string;
  readonly at: number;
  readonly tokens: number;
}

/** Legs older than this are dropped even without their finish event (a lost event must not count forever). */
const MAX_LEG_AGE_MS = 600_000;

/**
 * The prompt tokens each endpoint was sent and is still prefilling, as far as the gateways' dispatch events tell:
 * every start event with `inputTokens` opens a leg, its finish closes it. `pendingMs` turns them into the prefill
 * time still ahead of an endpoint, assuming each leg's prefill started when the leg did — so a pod busy with a
 * 30k-token prompt is seen as busy for the second or so that prompt takes, not as "one request in flight" like any
 * other. Kept per gateway so a gateway's snapshot or expiry drops what it can no longer vouch for.
 */
export class PrefillBacklog {
  /** gateway → leg id → leg. */
  readonly #byGateway = new Map<string, Map<string, OpenLeg>>();
  /** endpoint → open legs. */
  readonly #byEndpoint = new Map<string, Set<OpenLeg>>();

  open(gateway: string, id: string, endpoint: string, at: number, tokens: number): void {
    let legs = this.#byGateway.get(gateway);
    if (!legs) {
      legs = new Map();
      this.#byGateway.set(gateway, legs);
    }
    const old = legs.get(id);
    if (old) this.#unlink(old);
    const leg: OpenLeg = { endpoint, at, tokens };
    legs.set(id, leg);
    let set = this.#byEndpoint.get(endpoint);
    if (!set) {
      set = new Set();
      this.#byEndpoint.set(endpoint, set);
    }
    set.add(leg);
  }

  close(gateway: string, id: string): void {
    const legs = this.#byGateway.get(gateway);
    const leg = legs?.get(id);
    if (!legs || !leg) return;
    legs.delete(id);
    this.#unlink(leg);
  }

  /** Keeps only the gateway's legs on endpoints its snapshot still counts (undefined: drop them all). */
  retain(gateway: string, inflight: Readonly<Record<string, number>> | undefined): void {
    const legs = this.#byGateway.get(gateway);
    if (!legs) return;
    for (const [id, leg] of legs) {
      if (inflight !== undefined && (inflight[leg.endpoint] ?? 0) > 0) continue;
      legs.delete(id);
      this.#unlink(leg);
    }
    if (legs.size === 0) this.#byGateway.delete(gateway);
  }

  /**
   * Prefill time still ahead of `endpoint` at `now`, ms: for each open leg, its prompt's prefill
   * (`overheadMs + tokens/1000 · msPer1kTokens`) minus the time since the leg started, when positive.
   */
  pendingMs(endpoint: string, now: number, msPer1kTokens: number, overheadMs: number): number {
    const set = this.#byEndpoint.get(endpoint);
    if (!set) return 0;
    let ms = 0;
    for (const leg of set) {
      const age = now - leg.at;
      if (age > MAX_LEG_AGE_MS) continue;
      const left = overheadMs + (leg.tokens / 1000) * msPer1kTokens - age;
      if (left > 0) ms += left;
    }
    return ms;
  }

  #unlink(leg: OpenLeg): void {
    const set = this.#byEndpoint.get(leg.endpoint);
    if (!set) return;
    set.delete(leg);
    if (set.size === 0) this.#byEndpoint.delete(leg.endpoint);
  }
}
