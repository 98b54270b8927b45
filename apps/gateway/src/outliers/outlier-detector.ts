import { outlierKey, type OutlierReason, type OutlierRecord, type Stage } from '@triad/bus';
import { isJetStreamConflict } from '@triad/bus/client';
import type { LegInfo, LegOutcome } from '@triad/connectors';
import { DEFAULT_OUTLIER_POLICY, type OutlierPolicy } from '@triad/crd';
import { ErrorCode } from '@triad/errors';
import { UpstreamError, type ProxyRequest } from '@triad/request';
import type { Logger } from '@triad/runtime';
import type { OutlierTable } from '@triad/scheduling';

/** Where transitions are written: the outliers bucket (a `TypedKv`), compare-and-set on its revisions. */
export interface OutlierStore {
  getEntry(key: string): Promise<{ value: OutlierRecord; revision: number } | undefined>;
  create(key: string, value: OutlierRecord): Promise<number>;
  update(key: string, value: OutlierRecord, revision: number): Promise<number>;
}

/** What the detector reports (metrics). */
export interface OutlierEvents {
  ejected(server: string, stage: Stage, reason: OutlierReason): void;
  restored(server: string, stage: Stage): void;
}

/** What a leg's outcome says about its endpoint: a failure (with its kind), a success, or nothing. */
export function legVerdict(leg: LegInfo, outcome: LegOutcome): OutlierReason | 'ok' | undefined {
  if (outcome.ok) return 'ok';
  const err = outcome.error;
  // Only the leg's own failure counts: not a client leaving, a total timeout, or a sibling's failure it was
  // aborted with (an encode item cancelled because another item failed).
  if (!(err instanceof UpstreamError) || err.endpoint !== leg.endpoint.key || err.stage !== leg.stage) return undefined;
  if (err.code === ErrorCode.UpstreamConnect) return 'connect';
  if (err.code === ErrorCode.UpstreamTimeout) return 'timeout';
  if (err.status >= 500) return '5xx';
  // The connection broke: before any answer (status 0), or half-way through a 2xx answer (an engine that dies
  // mid-answer would otherwise never be ejected, since its answers start with a 200).
  if (err.status < 300) return 'reset';
  return undefined; // an engine 4xx judges the request, not the engine
}

/** How long the `n`-th ejection in a row lasts: the base, doubled each time, at most the maximum. */
export function ejectionMs(policy: OutlierPolicy, n: number): number {
  return Math.min(policy.maxEjectionMs, policy.baseEjectionMs * 2 ** Math.max(0, Math.min(n - 1, 30)));
}

/**
 * Outlier ejection, the gateway's half: counts each endpoint's consecutive failures per stage (5xx answers,
 * connect failures, resets, stage timeouts) from the legs this gateway runs, and writes the transitions to the
 * shared outliers bucket with compare-and-set, so every gateway and scheduler replica skips the same endpoints:
 *
 * - `consecutiveErrors` failures in a row → ejected for `baseEjectionTime`, doubled with each ejection in a row up
 *   to `maxEjectionTime` (a replica that finds the endpoint already ejected by another leaves it be);
 * - once the ejection has run out the endpoint is half-open: the schedulers offer it again and real requests probe
 *   it (their retries cover a failed probe). One success restores it; one failure ejects it again, for longer. A
 *   success while still ejected (a last-resort retry, a panicking stage, an active probe) restores it too;
 * - `ejections` resets after the endpoint stayed healthy as long as the longest ejection.
 *
 * Counting is per gateway replica (a success anywhere would have to reset everyone's count otherwise, a write per
 * request); the state is shared. The ceiling (`maxEjectionPercent`, never a whole pool) is applied where the
 * state is read, by the schedulers, so it holds for every replica alike.
 */
export class OutlierDetector {
  readonly #table: OutlierTable;
  readonly #store: OutlierStore;
  readonly #by: string;
  readonly #events: OutlierEvents;
  readonly #logger: Logger;
  readonly #now: () => number;
  /** `outlierKey` → consecutive failures this replica saw. */
  readonly #failures = new Map<string, number>();
  /** Keys with a write in flight (one at a time per key from this replica). */
  readonly #writing = new Set<string>();

  constructor(table: OutlierTable, store: OutlierStore, by: string, events: OutlierEvents, logger: Logger, now: () => number = Date.now) {
    this.#table = table;
    this.#store = store;
    this.#by = by;
    this.#events = events;
    this.#logger = logger;
    this.#now = now;
  }

  /** One leg ended (from the stage observer). */
  legEnded(ctx: ProxyRequest, leg: LegInfo, outcome: LegOutcome): void {
    const policy = ctx.routing.server.outlier ?? DEFAULT_OUTLIER_POLICY;
    if (policy.consecutiveErrors === 0) return;
    const verdict = legVerdict(leg, outcome);
    if (verdict === undefined) return;
    const endpoint = leg.endpoint.key;
    const record = this.#table.get(endpoint, leg.stage);
    if (verdict === 'ok') {
      // The common case, a success with no failures counted anywhere, builds no key and reads no clock.
      if (this.#failures.size > 0) this.#failures.delete(outlierKey(endpoint, leg.stage));
      // Half-open, or still ejected and tried as a last resort (no healthy endpoint left, or panic): it served.
      if (record?.state === 'ejected') {
        ctx.result.outliers.push({ endpoint: leg.endpoint.pod, stage: leg.stage, action: 'restored' });
        this.#restore(ctx.routing.server.key, endpoint, leg.stage, this.#now());
      }
      return;
    }
    const key = outlierKey(endpoint, leg.stage);
    const now = this.#now();
    const halfOpen = record !== undefined && record.state === 'ejected' && record.ejectedUntil <= now;
    const failures = (this.#failures.get(key) ?? 0) + 1;
    if (!halfOpen && failures < policy.consecutiveErrors) {
      this.#failures.set(key, failures);
      return;
    }
    this.#failures.delete(key);
    ctx.result.outliers.push({
      endpoint: leg.endpoint.pod,
      stage: leg.stage,
      action: halfOpen ? 'probe-failed' : 'ejected',
      reason: verdict,
    });
    this.#write(
      key,
      (current) => eject(current, { endpoint, stage: leg.stage, reason: verdict, failures, now, by: this.#by, policy }),
      () => this.#events.ejected(ctx.routing.server.key, leg.stage, verdict),
    );
  }

  /** An active probe of an ejected endpoint answered 2xx: its ejection ends now (the shared record says healthy). */
  probeSucceeded(server: string, endpoint: string, stage: Stage): void {
    this.#restore(server, endpoint, stage, this.#now());
  }

  /** Ends an ejection: the failure count starts over and the shared record says healthy. */
  #restore(server: string, endpoint: string, stage: Stage, now: number): void {
    const key = outlierKey(endpoint, stage);
    this.#failures.delete(key);
    this.#write(
      key,
      (current) => restore(current, now, this.#by),
      () => this.#events.restored(server, stage),
    );
  }

  /** Applies `next` to the stored record with compare-and-set (re-reading on a lost race, a few times). */
  #write(key: string, next: (current: OutlierRecord | undefined) => OutlierRecord | undefined, done: () => void): void {
    if (this.#writing.has(key)) return;
    this.#writing.add(key);
    // This replica acts on the transition at once (its next decision must not wait for NATS); the stored record,
    // this one or another replica's that won the race, replaces it when the write or the watch delivers.
    const [endpoint, stage] = splitKey(key);
    const provisional = next(this.#table.get(endpoint, stage));
    if (provisional !== undefined) this.#table.apply({ op: 'PUT', key, value: provisional });
    const attempt = async (): Promise<void> => {
      for (let i = 0; i < 4; i++) {
        const entry = await this.#store.getEntry(key);
        const value = next(entry?.value);
        if (value === undefined) return; // another replica made the transition already
        try {
          if (entry === undefined) await this.#store.create(key, value);
          else await this.#store.update(key, value, entry.revision);
        } catch (err) {
          if (isJetStreamConflict(err)) continue;
          throw err;
        }
        this.#table.apply({ op: 'PUT', key, value });
        this.#logger.warn(
          {
            endpoint: value.endpoint,
            stage: value.stage,
            state: value.state,
            reason: value.reason,
            ejections: value.ejections,
            ejectedForMs: value.state === 'ejected' ? value.ejectedUntil - value.ejectedAt : 0,
          },
          value.state === 'ejected' ? 'endpoint ejected (outlier detection)' : 'endpoint restored (outlier detection)',
        );
        done();
        return;
      }
    };
    attempt()
      .catch((err: unknown) => {
        this.#logger.warn({ err: (err as Error).message, key }, 'cannot write outlier state; this replica keeps its view');
      })
      .finally(() => this.#writing.delete(key));
  }
}

function splitKey(key: string): [string, Stage] {
  const dot = key.lastIndexOf('.');
  return [key.slice(0, dot), key.slice(dot + 1) as Stage];
}

interface EjectFacts {
  readonly endpoint: string;
  readonly stage: Stage;
  readonly reason: OutlierReason;
  readonly failures: number;
  readonly now: number;
  readonly by: string;
  readonly policy: OutlierPolicy;
}

/** The record after an ejection, or undefined when the endpoint is already ejected. */
export function eject(current: OutlierRecord | undefined, f: EjectFacts): OutlierRecord | undefined {
  if (current !== undefined && current.state === 'ejected' && current.ejectedUntil > f.now) return undefined;
  const calm = current?.state === 'healthy' && f.now - (current.healthySince ?? 0) >= f.policy.maxEjectionMs;
  const ejections = (current === undefined || calm ? 0 : current.ejections) + 1;
  return {
    schemaVersion: 1,
    endpoint: f.endpoint,
    stage: f.stage,
    state: 'ejected',
    ejectedAt: f.now,
    ejectedUntil: f.now + ejectionMs(f.policy, ejections),
    ejections,
    reason: f.reason,
    failures: f.failures,
    by: f.by,
  };
}

/**
 * The record after a success (real traffic once half-open or as a last resort, or an active probe): healthy again,
 * or undefined when it is not ejected (any more).
 */
export function restore(current: OutlierRecord | undefined, now: number, by: string): OutlierRecord | undefined {
  if (current === undefined || current.state !== 'ejected') return undefined;
  return { ...current, state: 'healthy', ejectedUntil: 0, healthySince: now, by };
}

/** Endpoints ejected at `now`, by stage (the `triad_gateway_outliers_ejected` gauge). */
export function countEjected(table: OutlierTable, now: number): Record<string, number> {
  const out: Record<string, number> = {};
  for (const r of table.records()) if (r.state === 'ejected' && r.ejectedUntil > now) out[r.stage] = (out[r.stage] ?? 0) + 1;
  return out;
}
