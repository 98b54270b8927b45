import type { OutlierRecord, Stage } from '@triad/bus';

/** A change of the outliers bucket, as the KV watch delivers it (structurally `KvChange<OutlierRecord>`). */
type OutlierChange =
  { readonly op: 'PUT'; readonly key: string; readonly value: OutlierRecord } | { readonly op: 'DEL'; readonly key: string };

/**
 * The shared outlier state as one process sees it (fed from the outliers bucket): which endpoint is ejected from
 * which stage, and until when. The scheduler service, the gateway's in-process scheduler and the gateway's
 * outlier detector read the same records, so every replica skips the same endpoints.
 */
export class OutlierTable {
  /** `endpoint` → stage → record. */
  readonly #byEndpoint = new Map<string, Map<Stage, OutlierRecord>>();
  readonly #keys = new Map<string, { endpoint: string; stage: Stage }>();
  readonly #listeners = new Set<OutlierListener>();

  /**
   * Calls `listener` after each change with the endpoint, stage and its record now (undefined once deleted), so a
   * reader of the ejected few (the gateway's active prober) need not scan every record. Returns the unsubscribe.
   */
  onChange(listener: OutlierListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  apply(change: OutlierChange): void {
    const before = this.#keys.get(change.key);
    if (before !== undefined) {
      const stages = this.#byEndpoint.get(before.endpoint);
      stages?.delete(before.stage);
      if (stages?.size === 0) this.#byEndpoint.delete(before.endpoint);
      this.#keys.delete(change.key);
    }
    if (change.op === 'DEL') {
      if (before !== undefined) for (const l of this.#listeners) l(before.endpoint, before.stage, undefined);
      return;
    }
    const r = change.value;
    let stages = this.#byEndpoint.get(r.endpoint);
    if (stages === undefined) {
      stages = new Map();
      this.#byEndpoint.set(r.endpoint, stages);
    }
    stages.set(r.stage, r);
    this.#keys.set(change.key, { endpoint: r.endpoint, stage: r.stage });
    if (before !== undefined && (before.endpoint !== r.endpoint || before.stage !== r.stage))
      for (const l of this.#listeners) l(before.endpoint, before.stage, undefined);
    for (const l of this.#listeners) l(r.endpoint, r.stage, r);
  }

  /** Whether any endpoint has a record at all (the scheduler skips the ejection step when none has). */
  get size(): number {
    return this.#keys.size;
  }

  get(endpoint: string, stage: Stage): OutlierRecord | undefined {
    return this.#byEndpoint.get(endpoint)?.get(stage);
  }

  /** The record of an endpoint ejected from `stage` at `now`, else undefined (healthy, unknown, or half-open). */
  ejected(endpoint: string, stage: Stage, now: number): OutlierRecord | undefined {
    const r = this.#byEndpoint.get(endpoint)?.get(stage);
    return r !== undefined && r.state === 'ejected' && r.ejectedUntil > now ? r : undefined;
  }

  /** Every record (for metrics and status). */
  records(): IterableIterator<OutlierRecord> {
    const all: OutlierRecord[] = [];
    for (const stages of this.#byEndpoint.values()) all.push(...stages.values());
    return all.values();
  }
}

/** Told each change of an outlier table: the endpoint and stage, and the record now (undefined once deleted). */
type OutlierListener = (endpoint: string, stage: Stage, record: OutlierRecord | undefined) => void;

/** The ModelServer's outlier settings one stage's candidate step applies. */
export interface EjectionPolicy {
  readonly maxEjectionPercent: number;
  readonly panicThresholdPercent: number;
}

/** What outlier state does to one stage's candidate set. */
interface Ejection {
  /** Positions to leave out of the ranking, least recently failed (earliest ejection) first. */
  readonly drop: readonly number[];
  /** Every candidate is ejected: the stage has no healthy endpoint. */
  readonly all: boolean;
  /** Fewer candidates are healthy than the panic threshold: ejection is ignored, every candidate is ranked. */
  readonly panic: boolean;
}

/**
 * Which of a stage's candidates (endpoint keys) stay out of the ranking at `now`. Envoy's rules: when the healthy
 * share is below `panicThresholdPercent`, nothing stays out (panic: balance over all of them); otherwise the ejected
 * ones do, at most `maxEjectionPercent` of the set and never all of it, the earliest ejections first (every replica
 * computes the same answer from the same records). Undefined when none is ejected. The dropped ones are not lost:
 * the plans put them after the healthy ones as last-resort alternates, in the order given here.
 */
export function ejectionOf(
  table: OutlierTable,
  stage: Stage,
  now: number,
  size: number,
  keyAt: (i: number) => string,
  policy: EjectionPolicy,
): Ejection | undefined {
  let ejected: { i: number; at: number; key: string }[] | undefined;
  for (let i = 0; i < size; i++) {
    const key = keyAt(i);
    const r = table.ejected(key, stage, now);
    if (r !== undefined) (ejected ??= []).push({ i, at: r.ejectedAt, key });
  }
  if (ejected === undefined) return undefined;
  const healthy = size - ejected.length;
  const all = healthy === 0;
  if (healthy * 100 < policy.panicThresholdPercent * size) return { drop: [], all, panic: true };
  const allowed = Math.min(Math.floor((size * policy.maxEjectionPercent) / 100), size - 1);
  if (allowed <= 0) return { drop: [], all, panic: false };
  ejected.sort((a, b) => a.at - b.at || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  return { drop: ejected.slice(0, allowed).map((e) => e.i), all, panic: false };
}
