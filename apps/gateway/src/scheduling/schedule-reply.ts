import type { DecisionOrError } from '@triad/bus';

const decoder = new TextDecoder();

function isEndpointRef(v: unknown): boolean {
  const e = v as { ip?: unknown; port?: unknown; key?: unknown } | null;
  return e !== null && typeof e === 'object' && typeof e.ip === 'string' && typeof e.port === 'number' && typeof e.key === 'string';
}

function isDecision(v: unknown): boolean {
  const d = v as { id?: unknown; ok?: unknown; attempts?: unknown; encoders?: unknown; code?: unknown } | null;
  if (d === null || typeof d !== 'object' || typeof d.id !== 'string') return false;
  if (d.ok === false) return typeof d.code === 'string';
  if (d.ok !== true || !Array.isArray(d.attempts) || d.attempts.length === 0 || !Array.isArray(d.encoders)) return false;
  for (const a of d.attempts as { endpoint?: unknown; prefill?: unknown }[]) {
    if (!isEndpointRef(a?.endpoint) || (a.prefill !== undefined && !isEndpointRef(a.prefill))) return false;
  }
  for (const c of d.encoders as { endpoint?: unknown; alternates?: unknown; item?: unknown }[]) {
    if (typeof c?.item !== 'number' || !isEndpointRef(c.endpoint) || !Array.isArray(c.alternates)) return false;
  }
  return true;
}

/**
 * Checks a `ScheduleBatchReply` for the fields the stage loop relies on, or returns why it is unusable. This is
 * the hot path (one reply per batch), so it checks structure by hand instead of running the full zod schema;
 * the scheduler builds replies from the same schema types.
 */
export function checkScheduleReply(data: Uint8Array, expected: number): DecisionOrError[] | string {
  let reply: { v?: unknown; decisions?: unknown; error?: { message?: unknown } };
  try {
    reply = JSON.parse(decoder.decode(data)) as typeof reply;
  } catch (err) {
    return `not JSON: ${(err as Error).message}`;
  }
  if (reply === null || typeof reply !== 'object' || reply.v !== 1) return 'unknown reply version';
  if (reply.error !== undefined) return `scheduler rejected the batch: ${String(reply.error?.message)}`;
  const decisions = reply.decisions;
  if (!Array.isArray(decisions) || decisions.length !== expected) return 'reply does not hold one decision per request';
  for (const d of decisions) if (!isDecision(d)) return 'malformed decision';
  return decisions as DecisionOrError[];
}
