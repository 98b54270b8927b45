import type { Leg, Trace } from './normalise';

/** What one router did with one client request of the set, normalised. */
export interface RequestResult {
  readonly case: string;
  /** The client's view: HTTP status and whether the answer was complete (a stream ended with `[DONE]`, no error). */
  readonly client: { readonly status: number; readonly complete: boolean };
  readonly trace: Trace;
  /**
   * Engine-side outcome: counter deltas per stage over the request (`D.kvPullsReceived`, `D.localPrefillFallbacks`,
   * `P.localEncodes`, …) and what is left held afterwards (`P.kvHeldRequests`); zeros omitted.
   */
  readonly outcome: Readonly<Record<string, number>>;
}

/** One difference between the reference's and Triad's handling of the same request. */
export interface Difference {
  readonly case: string;
  /** Where: `client.status`, `order`, `overlap:D#1~P#1`, `leg:P#1`, `P#1.header.x-request-id`, `D#1.body.kv_transfer_params.transfer_id`, `outcome.D.localPrefillFallbacks`. */
  readonly key: string;
  readonly reference: unknown;
  readonly triad: unknown;
}

export const ABSENT = '(absent)';

function same(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

function push(out: Difference[], c: string, key: string, reference: unknown, triad: unknown): void {
  if (!same(reference, triad))
    out.push({ case: c, key, reference: reference === undefined ? ABSENT : reference, triad: triad === undefined ? ABSENT : triad });
}

function diffMaps(
  out: Difference[],
  c: string,
  prefix: string,
  a: Readonly<Record<string, unknown>>,
  b: Readonly<Record<string, unknown>>,
): void {
  const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort();
  for (const k of keys) push(out, c, `${prefix}${k}`, a[k], b[k]);
}

function diffLeg(out: Difference[], c: string, a: Leg, b: Leg): void {
  push(out, c, `${a.id}.method`, a.method, b.method);
  push(out, c, `${a.id}.path`, a.path, b.path);
  push(out, c, `${a.id}.status`, a.status, b.status);
  diffMaps(out, c, `${a.id}.header.`, a.headers, b.headers);
  diffMaps(out, c, `${a.id}.`, a.fields, b.fields);
  diffMaps(out, c, `${a.id}.answer.`, a.answer, b.answer);
}

/**
 * Every difference between two routers' handling of one request: client status, the legs (by family and ordinal),
 * their order and overlap, each leg's method, path, status, protocol headers, body fields and answer fields, and
 * the engine-side outcome. A leg only one router made is one difference (`leg:<id>`), its fields are not listed.
 */
export function diffResults(reference: RequestResult, triad: RequestResult): Difference[] {
  const c = reference.case;
  const out: Difference[] = [];
  push(out, c, 'client.status', reference.client.status, triad.client.status);
  push(out, c, 'client.complete', reference.client.complete, triad.client.complete);
  push(out, c, 'order', reference.trace.order.join(','), triad.trace.order.join(','));
  const ra = new Set(reference.trace.overlaps);
  const ta = new Set(triad.trace.overlaps);
  for (const o of [...new Set([...ra, ...ta])].sort())
    push(out, c, `overlap:${o}`, ra.has(o) ? 'overlapping' : 'sequential', ta.has(o) ? 'overlapping' : 'sequential');
  const legsA = new Map(reference.trace.legs.map((l) => [l.id, l]));
  const legsB = new Map(triad.trace.legs.map((l) => [l.id, l]));
  for (const id of [...new Set([...legsA.keys(), ...legsB.keys()])].sort()) {
    const a = legsA.get(id);
    const b = legsB.get(id);
    if (a && b) diffLeg(out, c, a, b);
    else push(out, c, `leg:${id}`, a ? `${a.method} ${a.path}` : undefined, b ? `${b.method} ${b.path}` : undefined);
  }
  diffMaps(out, c, 'outcome.', reference.outcome, triad.outcome);
  return out;
}
