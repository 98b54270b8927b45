/** One endpoint's latency as the gateways observed it. */
export interface LatencyObservation {
  /** Moving average of time to first token of the legs it answered (prefill legs: the prefill's duration), ms; 0 = none. */
  ttftMs: number;
  /** Moving average of time per output token of its streamed answers, ms; 0 = none. */
  tpotMs: number;
  /** When the latest observation was made (ms since epoch). */
  at: number;
}

/** Weight of a new observation in the moving averages: a few requests move them, one outlier does not own them. */
const ALPHA = 0.3;

/**
 * Per-endpoint TTFT and TPOT measured by the gateways (carried on their dispatch finish events), as exponentially
 * weighted moving averages with the time of the latest observation. Every scheduler replica and a gateway's local
 * fallback follow the same dispatch feed, so they hold the same figures. Readers age them (`observed-latency`):
 * an endpoint nobody sends to keeps old figures, which must not keep it shunned.
 */
export class ObservedLatency {
  readonly #byEndpoint = new Map<string, LatencyObservation>();

  observe(endpoint: string, ttftMs: number | undefined, tpotMs: number | undefined, at: number): void {
    if (!(ttftMs !== undefined && ttftMs >= 0) && !(tpotMs !== undefined && tpotMs >= 0)) return;
    let o = this.#byEndpoint.get(endpoint);
    if (!o) {
      o = { ttftMs: 0, tpotMs: 0, at };
      this.#byEndpoint.set(endpoint, o);
    }
    if (ttftMs !== undefined && ttftMs >= 0) o.ttftMs = o.ttftMs === 0 ? ttftMs : o.ttftMs + ALPHA * (ttftMs - o.ttftMs);
    if (tpotMs !== undefined && tpotMs >= 0) o.tpotMs = o.tpotMs === 0 ? tpotMs : o.tpotMs + ALPHA * (tpotMs - o.tpotMs);
    if (at > o.at) o.at = at;
  }

  get(endpoint: string): LatencyObservation | undefined {
    return this.#byEndpoint.get(endpoint);
  }

  forget(endpoint: string): void {
    this.#byEndpoint.delete(endpoint);
  }

  get size(): number {
    return this.#byEndpoint.size;
  }
}
