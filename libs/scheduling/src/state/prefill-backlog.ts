import { removeAt } from './remove-at';

/** A leg that carried prompt tokens to an endpoint and has not finished. */
export class OpenLeg {
  constructor(
    readonly endpoint: string,
    readonly at: number,
    readonly tokens: number,
    /** The leg's stage (a gateway's legs; empty for a leg a decision reserved). */
    readonly stage: string,
  ) {}
}

/** No leg: what holds a leg or none keeps one kind of object in its field (a field of mixed kinds costs V8 a deopt). */
export const NO_LEG = new OpenLeg('', 0, 0, '');

/** Legs older than this are dropped even without their finish event (a lost event must not count forever). */
const MAX_LEG_AGE_MS = 600_000;

/**
 * The prompt tokens each endpoint was sent and is still prefilling, as far as the gateways' dispatch events tell:
 * every start event with `inputTokens` opens a leg, its finish closes it. `pendingMs` turns them into the prefill
 * time still ahead of an endpoint, assuming each leg's prefill started when the leg did — so a pod busy with a
 * 30k-token prompt is seen as busy for the second or so that prompt takes, not as "one request in flight" like any
 * other. Kept per gateway so a gateway's snapshot or expiry drops what it can no longer vouch for.
 *
 * A gateway's legs are found by request id, then by endpoint and stage among that request's few legs: a key joining
 * the three was a new string per event, flattened and hashed for each lookup (with the dispatch events' Map lookups,
 * a tenth of a scheduler's instructions per EPD request). Legs a decision reserves (`add`) are held by the caller.
 */
export class PrefillBacklog {
  /** gateway → request id → its open legs. */
  readonly #byGateway = new Map<string, Map<string, OpenLeg[]>>();
  /**
   * endpoint → open legs. An endpoint's set stays when it empties, until a sweep (once the map has doubled since
   * the last one, plus 64) drops the empty ones: at a few requests in flight a set would be made, emptied and
   * dropped per leg, and V8 shrinks a Map's table in its runtime on a delete that leaves it nearly empty.
   */
  readonly #byEndpoint = new Map<string, Set<OpenLeg>>();
  /** Sets held after the last sweep. */
  #sweptSize = 0;

  /** Opens a gateway's leg; one already open for the same request, endpoint and stage is replaced. */
  open(gateway: string, requestId: string, endpoint: string, stage: string, at: number, tokens: number): void {
    let requests = this.#byGateway.get(gateway);
    if (!requests) {
      requests = new Map();
      this.#byGateway.set(gateway, requests);
    }
    const leg = new OpenLeg(endpoint, at, tokens, stage);
    const legs = requests.get(requestId);
    if (legs === undefined) requests.set(requestId, [leg]);
    else {
      const i = indexOfLeg(legs, endpoint, stage);
      if (i >= 0) {
        this.#unlink(legs[i]);
        removeAt(legs, i);
      }
      legs.push(leg);
    }
    this.#link(leg);
  }

  /** Closes a gateway's leg (nothing when none is open). */
  close(gateway: string, requestId: string, endpoint: string, stage: string): void {
    const requests = this.#byGateway.get(gateway);
    const legs = requests?.get(requestId);
    if (!requests || !legs) return;
    const i = indexOfLeg(legs, endpoint, stage);
    if (i < 0) return;
    const leg = legs[i];
    if (legs.length === 1) requests.delete(requestId);
    else removeAt(legs, i);
    this.#unlink(leg);
  }

  /** Counts a leg no gateway started yet (a decision's reservation); the caller ends it with `remove`. */
  add(endpoint: string, at: number, tokens: number): OpenLeg {
    const leg = new OpenLeg(endpoint, at, tokens, '');
    this.#link(leg);
    return leg;
  }

  /** Ends a leg from `add`. */
  remove(leg: OpenLeg): void {
    this.#unlink(leg);
  }

  /** Keeps only the gateway's legs on endpoints its snapshot still counts (undefined: drop them all). */
  retain(gateway: string, inflight: Readonly<Record<string, number>> | undefined): void {
    const requests = this.#byGateway.get(gateway);
    if (!requests) return;
    for (const [requestId, legs] of requests) {
      let kept = 0;
      for (const leg of legs) {
        if (inflight !== undefined && (inflight[leg.endpoint] ?? 0) > 0) legs[kept++] = leg;
        else this.#unlink(leg);
      }
      if (kept === 0) requests.delete(requestId);
      else legs.length = kept;
    }
    if (requests.size === 0) this.#byGateway.delete(gateway);
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

  #link(leg: OpenLeg): void {
    let set = this.#byEndpoint.get(leg.endpoint);
    if (!set) {
      if (this.#byEndpoint.size >= 2 * this.#sweptSize + 64) this.#sweep();
      set = new Set();
      this.#byEndpoint.set(leg.endpoint, set);
    }
    set.add(leg);
  }

  /** Endpoints holding a set of legs, emptied ones not swept yet included (tests, debugging). */
  get endpointsHeld(): number {
    return this.#byEndpoint.size;
  }

  /** Drops the endpoints' emptied sets. */
  #sweep(): void {
    for (const [endpoint, set] of this.#byEndpoint) if (set.size === 0) this.#byEndpoint.delete(endpoint);
    this.#sweptSize = this.#byEndpoint.size;
  }

  #unlink(leg: OpenLeg): void {
    this.#byEndpoint.get(leg.endpoint)?.delete(leg);
  }
}

/** Where the leg of `endpoint` and `stage` is among one request's legs (-1: none); the stage, interned, first. */
function indexOfLeg(legs: readonly OpenLeg[], endpoint: string, stage: string): number {
  for (let i = 0; i < legs.length; i++) if (legs[i].stage === stage && legs[i].endpoint === endpoint) return i;
  return -1;
}
