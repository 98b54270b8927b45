import type { OutlierRecord, Stage } from '@triad/bus';

/** A change of the outliers bucket, as the KV watch delivers it (structurally `KvChange<OutlierRecord>`). */
export type OutlierChange =
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

  apply(change: OutlierChange): void {
    const before = this.#keys.get(change.key);
    if (before !== undefined) {
      const stages = this.#byEndpoint.get(before.endpoint);
      stages?.delete(before.stage);
      if (stages?.size === 0) this.#byEndpoint.delete(before.endpoint);
      this.#keys.delete(change.key);
    }
    if (change.op === 'DEL') return;
    const r = change.value;
    let stages = this.#byEndpoint.get(r.endpoint);
    if (stages === undefined) {
      stages = new Map();
      this.#byEndpoint.set(r.endpoint, stages);
    }
    stages.set(r.stage, r);
    this.#keys.set(change.key, { endpoint: r.endpoint, stage: r.stage });
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

/**
 * Which of `candidates` (endpoint keys of one stage's candidate set) stay out at `now`: the ejected ones, at most
 * `maxEjectionPercent` of the set and never all of it. When more are ejected than the ceiling allows, the earliest
 * ejections are honoured (every replica computes the same answer from the same records). Returns the positions
 * to drop, or undefined when none.
 */
export function ejectedPositions(
  table: OutlierTable,
  stage: Stage,
  now: number,
  size: number,
  keyAt: (i: number) => string,
  maxEjectionPercent: number,
): number[] | undefined {
  let ejected: { i: number; at: number; key: string }[] | undefined;
  for (let i = 0; i < size; i++) {
    const key = keyAt(i);
    const r = table.ejected(key, stage, now);
    if (r !== undefined) (ejected ??= []).push({ i, at: r.ejectedAt, key });
  }
  if (ejected === undefined) return undefined;
  const allowed = Math.min(Math.floor((size * maxEjectionPercent) / 100), size - 1);
  if (allowed <= 0) return undefined;
  if (ejected.length > allowed) ejected.sort((a, b) => a.at - b.at || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  return ejected.slice(0, allowed).map((e) => e.i);
}
