import type { DispatchBatch, DispatchEvent } from '@triad/bus';
import type { InflightCell } from './endpoint';
import { ObservedLatency } from './observed-latency';
import { NO_LEG, PrefillBacklog, type OpenLeg } from './prefill-backlog';
import { removeAt } from './remove-at';

export interface InflightTrackerOptions {
  /** A gateway's counts are dropped after this many snapshot intervals without a snapshot (default 3). */
  readonly missedSnapshots?: number;
  /** Interval assumed when a gateway does not state `snapshotIntervalMs` (default 1000). */
  readonly defaultSnapshotIntervalMs?: number;
}

/** A leg the scheduler chose that its gateway has not started yet. */
export interface ReservedLeg {
  readonly endpoint: string;
  /** How long it counts without its start event. */
  readonly ttlMs: number;
  /** Prompt tokens the endpoint will prefill (counted in its prefill backlog until the leg starts). */
  readonly tokens?: number | undefined;
}

interface Reservation {
  readonly endpoint: string;
  readonly until: number;
  /**
   * The prompt it counts in the prefill backlog (`NO_LEG`: none, so the field only ever holds legs and V8 keeps
   * one shape for every reservation): one per request and endpoint at most, held by the first of the
   * request's reservations there that has one.
   */
  backlog: OpenLeg;
}

/** A tracker's counter of one endpoint, with the key string it was made for. */
interface KeyedCell extends InflightCell {
  readonly key: string;
}

interface GatewayView {
  /**
   * Legs in flight per endpoint key. An endpoint back at zero keeps its entry until the gateway's next snapshot
   * replaces them all (but in a view of the process's own, which has none): at a few requests in flight each count
   * goes 0, 1, 0, and V8 shrinks a Map's table in its runtime on a delete that leaves it nearly empty.
   */
  readonly counts: Map<string, number>;
  lastSeq: number;
  lastSnapshotAt: number;
  intervalMs: number;
  /** Fed directly by its own process (`applyEvent`): it sends itself no snapshots, so it never expires. */
  readonly own?: boolean;
}

/** Counters about the dispatch feed itself, for metrics. */
interface InflightStats {
  gateways: number;
  /** Batches whose seq skipped ahead (events lost; the next snapshot heals the counts). */
  gaps: number;
  /** Gateways dropped for missing their snapshots. */
  expired: number;
  /** Gateways that restarted their sequence (seq went back). */
  resets: number;
}

/**
 * In-flight requests per endpoint, summed over every gateway, from the gateways' dispatch batches. A batch with an
 * `inflight` snapshot replaces that gateway's view (the snapshot already includes the batch's events); a batch
 * without one applies its start/finish events. A gateway whose snapshots stop is forgotten after
 * `missedSnapshots` intervals, so a crashed gateway's requests do not count forever. Every scheduler replica and
 * a gateway's local fallback run the same code over the same messages, so they agree on the counts.
 */
export class InflightTracker {
  readonly #totals = new Map<string, KeyedCell>();
  /** The cells with a non-zero count: usually far fewer than the endpoints, which makes sparse reads cheap. */
  readonly #active = new Map<string, InflightCell>();
  readonly #gateways = new Map<string, GatewayView>();
  /** Legs counted before they start (`reserve`), by request id. */
  readonly #reserved = new Map<string, Reservation[]>();
  #nextReservationExpiry = Number.POSITIVE_INFINITY;
  readonly #missed: number;
  readonly #defaultInterval: number;
  #nextExpiry = Number.POSITIVE_INFINITY;
  readonly stats: InflightStats = { gateways: 0, gaps: 0, expired: 0, resets: 0 };
  /** TTFT and TPOT per endpoint from the gateways' finish events (the `observed-latency` scorer reads them). */
  readonly latency = new ObservedLatency();
  /** Prompt tokens in flight per endpoint with their start times (the `prefill-backlog` scorer reads them). */
  readonly backlog = new PrefillBacklog();

  constructor(options: InflightTrackerOptions = {}) {
    this.#missed = options.missedSnapshots ?? 3;
    this.#defaultInterval = options.defaultSnapshotIntervalMs ?? 1000;
  }

  /** Applies one `triad.v1.dispatch` message received at `now` (ms). */
  applyBatch(batch: DispatchBatch, now: number): void {
    this.expire(now);
    let gw = this.#gateways.get(batch.gateway);
    if (gw && batch.seq <= gw.lastSeq) {
      // The gateway restarted its numbering: what we held for it is history.
      this.stats.resets++;
      this.#replace(gw, new Map());
      this.backlog.retain(batch.gateway, undefined);
    } else if (gw && batch.seq > gw.lastSeq + 1) {
      this.stats.gaps++;
    }
    if (!gw) {
      gw = { counts: new Map(), lastSeq: batch.seq, lastSnapshotAt: now, intervalMs: this.#defaultInterval };
      this.#gateways.set(batch.gateway, gw);
      this.stats.gateways = this.#gateways.size;
    }
    gw.lastSeq = batch.seq;
    if (batch.snapshotIntervalMs !== undefined) gw.intervalMs = batch.snapshotIntervalMs;
    if (batch.inflight) {
      this.#replace(gw, new Map(Object.entries(batch.inflight)));
      gw.lastSnapshotAt = now;
      for (const ev of batch.events) this.#observe(batch.gateway, ev, ev.endpoint, false);
      this.backlog.retain(batch.gateway, batch.inflight);
    } else {
      for (const ev of batch.events) this.#applyEvent(batch.gateway, gw, ev);
    }
    this.#nextExpiry = Math.min(this.#nextExpiry, gw.lastSnapshotAt + this.#missed * gw.intervalMs);
  }

  /**
   * Only the latency a finish event measured (TTFT, TPOT), into the per-endpoint moving averages; no count. For a
   * caller that holds the event's count back but must keep the averages in order (the gateway's fallback).
   * `endpoint`: the event's endpoint key, the tracker's own string of it where the caller has it.
   */
  observeLatency(event: DispatchEvent, endpoint: string = event.endpoint): void {
    if (event.type === 'finish' && (event.ttftMs !== undefined || event.tpotMs !== undefined))
      this.latency.observe(endpoint, event.ttftMs, event.tpotMs, event.at);
  }

  /**
   * Applies one event of `gateway` directly (a gateway feeding its own dispatches without a round-trip). That
   * gateway's counts never expire: it is this process, and it sends itself no snapshots.
   */
  applyEvent(gateway: string, event: DispatchEvent): void {
    let gw = this.#gateways.get(gateway);
    if (!gw) {
      gw = { counts: new Map(), lastSeq: -1, lastSnapshotAt: 0, intervalMs: this.#defaultInterval, own: true };
      this.#gateways.set(gateway, gw);
      this.stats.gateways = this.#gateways.size;
    }
    this.#applyEvent(gateway, gw, event);
  }

  /** Total in-flight requests on an endpoint across gateways. */
  count(endpointKey: string): number {
    return this.#totals.get(endpointKey)?.count ?? 0;
  }

  /** @internal A stable counter object for an endpoint, read by reference on the hot path. */
  cell(endpointKey: string): InflightCell {
    return this.#cellOf(endpointKey);
  }

  #cellOf(key: string): KeyedCell {
    let c = this.#totals.get(key);
    if (!c) {
      c = { count: 0, key };
      this.#totals.set(key, c);
    }
    return c;
  }

  /** Drops gateways whose snapshots stopped; cheap when nothing is due. Returns the dropped gateway ids. */
  expire(now: number): string[] {
    if (now >= this.#nextReservationExpiry) this.#expireReservations(now);
    if (now < this.#nextExpiry) return [];
    const dropped: string[] = [];
    let next = Number.POSITIVE_INFINITY;
    for (const [id, gw] of this.#gateways) {
      if (gw.own === true) continue;
      const deadline = gw.lastSnapshotAt + this.#missed * gw.intervalMs;
      if (now >= deadline) {
        this.#replace(gw, new Map());
        this.#gateways.delete(id);
        this.backlog.retain(id, undefined);
        dropped.push(id);
      } else {
        next = Math.min(next, deadline);
      }
    }
    this.#nextExpiry = next;
    this.stats.expired += dropped.length;
    this.stats.gateways = this.#gateways.size;
    return dropped;
  }

  /**
   * Counts a request on the endpoints just chosen for it before their legs start there. The gateway starts a leg
   * only after the decision's reply reached it, and its start event reaches the schedulers a NATS hop later; until
   * then every decision (the rest of the same batch first) would see those endpoints as idle and pile a burst onto
   * the one its affinity prefers. A decode pod of a P/D request waits for its prefill, so it gets a longer `ttlMs`.
   * Each reservation ends when its leg's start event arrives (from any gateway) or after its `ttlMs`; a new
   * decision for the same request (a retry with `exclude`) replaces the request's reservations, and a start event
   * of the request on an endpoint it did not reserve (the gateway decided otherwise) ends them all. Legs with `tokens`
   * also count in the prefill backlog meanwhile.
   */
  reserve(requestId: string, legs: readonly ReservedLeg[], now: number): void {
    this.#release(requestId);
    if (legs.length === 0) return;
    const held: Reservation[] = [];
    for (const leg of legs) {
      const until = now + leg.ttlMs;
      this.#add(leg.endpoint, 1);
      let backlog = NO_LEG;
      if (leg.tokens !== undefined && leg.tokens > 0) {
        // A second prompt for the same endpoint replaces the first in the backlog.
        const earlier = withBacklog(held, leg.endpoint);
        if (earlier !== undefined) this.#dropBacklog(earlier);
        backlog = this.backlog.add(leg.endpoint, now, leg.tokens);
      }
      held.push({ endpoint: leg.endpoint, until, backlog });
      if (until < this.#nextReservationExpiry) this.#nextReservationExpiry = until;
    }
    this.#reserved.set(requestId, held);
  }

  #release(requestId: string): void {
    const old = this.#reserved.get(requestId);
    if (!old) return;
    this.#reserved.delete(requestId);
    for (const r of old) {
      this.#add(r.endpoint, -1);
      this.#dropBacklog(r);
    }
  }

  /**
   * Ends one reserved leg (its start event came, or its time ran out): the request's first reservation on
   * `endpoint`, and the prompt the request counts in the backlog there. Without `uncount`, the endpoint's total
   * keeps the leg (the caller counts it on as the gateway's).
   */
  #releaseLeg(requestId: string, endpoint: string, held: Reservation[], uncount = true): boolean {
    let i = 0;
    while (i < held.length && held[i].endpoint !== endpoint) i++;
    if (i === held.length) return false;
    const released = held[i];
    removeAt(held, i);
    if (held.length === 0) this.#reserved.delete(requestId);
    if (uncount) this.#add(endpoint, -1);
    this.#dropBacklog(released.backlog !== NO_LEG ? released : (withBacklog(held, endpoint) ?? released));
    return true;
  }

  #dropBacklog(reservation: Reservation): void {
    if (reservation.backlog === NO_LEG) return;
    this.backlog.remove(reservation.backlog);
    reservation.backlog = NO_LEG;
  }

  /** Current totals by endpoint key (non-zero only), for debugging and tests. */
  snapshot(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const [k, c] of this.#active) out[k] = c.count;
    return out;
  }

  /** Endpoints with requests in flight (do not mutate). */
  active(): ReadonlyMap<string, InflightCell> {
    return this.#active;
  }

  #expireReservations(now: number): void {
    let next = Number.POSITIVE_INFINITY;
    for (const [id, held] of this.#reserved) {
      for (const r of [...held]) {
        if (r.until <= now) this.#releaseLeg(id, r.endpoint, held);
        else if (r.until < next) next = r.until;
      }
    }
    this.#nextReservationExpiry = next;
  }

  #add(key: string, delta: number): void {
    this.#addTo(this.#cellOf(key), delta);
  }

  #addTo(c: KeyedCell, delta: number): void {
    const before = c.count;
    c.count = before + delta;
    if (before === 0 && c.count !== 0) this.#active.set(c.key, c);
    else if (before !== 0 && c.count === 0) this.#active.delete(c.key);
  }

  /**
   * What an event tells besides the counts: measured latency, and the prompt tokens a leg carries. With `handOver`, a
   * start that ends a reservation on its endpoint leaves that endpoint's total as it is and says so (true): the
   * caller counts the leg on as the gateway's, and the total would go down by one and back up. `endpoint` is the
   * event's endpoint key, the tracker's own string of it where the caller has it.
   */
  #observe(gateway: string, ev: DispatchEvent, endpoint: string, handOver: boolean): boolean {
    if (ev.type === 'start') {
      const held = this.#reserved.get(ev.requestId);
      let handed = false;
      // A leg on an endpoint this decision did not choose: the gateway placed the request otherwise (its budget ran
      // out and it decided locally, or it failed over), so the decision's other legs will never start either. Left
      // reserved, they would count a phantom request on those pods for up to their TTL (30 s on a decode pod).
      if (held !== undefined) {
        if (this.#releaseLeg(ev.requestId, endpoint, held, !handOver)) handed = handOver;
        else this.#release(ev.requestId);
      }
      if (ev.inputTokens !== undefined && ev.inputTokens > 0 && ev.stage !== 'encode')
        this.backlog.open(gateway, ev.requestId, endpoint, ev.stage, ev.at, ev.inputTokens);
      return handed;
    }
    // An encode leg opened none: its key is not built (nor hashed) for it.
    if (ev.stage !== 'encode') this.backlog.close(gateway, ev.requestId, endpoint, ev.stage);
    this.observeLatency(ev, endpoint);
    return false;
  }

  #applyEvent(gateway: string, gw: GatewayView, ev: DispatchEvent): void {
    // The endpoint's counter, looked up once, and its key string: the one the reservations (the index's keys) and
    // the maps below already hold, so their lookups and comparisons meet the same string, not an equal new one
    // from each message's JSON.
    const cell = this.#cellOf(ev.endpoint);
    const endpoint = cell.key;
    const handed = this.#observe(gateway, ev, endpoint, true);
    const before = gw.counts.get(endpoint) ?? 0;
    const after = ev.type === 'start' ? before + 1 : Math.max(0, before - 1);
    if (after !== before) {
      if (after === 0 && gw.own === true) gw.counts.delete(endpoint);
      else gw.counts.set(endpoint, after);
    }
    const delta = after - before - (handed ? 1 : 0);
    if (delta !== 0) this.#addTo(cell, delta);
  }

  /** Swaps a gateway's counts for `next`, adjusting the totals by the difference. */
  #replace(gw: GatewayView, next: Map<string, number>): void {
    for (const [k, n] of gw.counts) {
      // A count kept at zero moves nothing (and -0, not a small integer, would deoptimize #add and its inliners).
      if (n !== 0 && !next.has(k)) this.#add(k, -n);
    }
    for (const [k, n] of next) {
      const delta = n - (gw.counts.get(k) ?? 0);
      if (delta !== 0) this.#add(k, delta);
    }
    gw.counts.clear();
    for (const [k, n] of next) if (n > 0) gw.counts.set(k, n);
  }
}

/** The first of a request's reservations on `endpoint` that counts a prompt in the backlog. */
function withBacklog(held: readonly Reservation[], endpoint: string): Reservation | undefined {
  for (const r of held) if (r.backlog !== NO_LEG && r.endpoint === endpoint) return r;
  return undefined;
}
