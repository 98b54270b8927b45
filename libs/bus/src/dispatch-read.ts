import { PackedLegCodes, unpackLegs, type DispatchBatch, type PackedLegs } from './dispatch';
import { SCHEMA_VERSION } from './records';

/** Every key `DispatchBatchSchema` knows: a batch with another one goes to the schema (which drops it). */
const BATCH_KEYS = new Set(['v', 'gateway', 'seq', 'events', 'packed', 'inflight', 'snapshotIntervalMs']);
/** Every key `PackedLegsSchema` knows. */
const PACKED_KEYS = new Set(['at', 'requests', 'endpoints', 'legs']);
/** Every key `DispatchEventSchema` knows. */
const EVENT_KEYS = new Set(['type', 'requestId', 'endpoint', 'stage', 'at', 'ok', 'inputTokens', 'outputTokens', 'ttftMs', 'tpotMs']);
const STAGES = new Set(['aggregated', 'encode', 'prefill', 'decode']);

/** `z.number().int()`: zod 4 takes safe integers only. */
const isInt = (v: unknown): boolean => typeof v === 'number' && Number.isSafeInteger(v);
const isCount = (v: unknown): boolean => isInt(v) && (v as number) >= 0;
/** `z.number().min(0)`: finite (zod 4 refuses Infinity and NaN) and not negative. */
const isDuration = (v: unknown): boolean => typeof v === 'number' && Number.isFinite(v) && v >= 0;
const isPlainObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

function isEvent(v: unknown): boolean {
  if (!isPlainObject(v)) return false;
  for (const k in v) if (!EVENT_KEYS.has(k)) return false;
  const type = v['type'];
  if (type !== 'start' && type !== 'finish') return false;
  if (typeof v['requestId'] !== 'string' || typeof v['endpoint'] !== 'string') return false;
  const stage = v['stage'];
  if (typeof stage !== 'string' || !STAGES.has(stage) || !isInt(v['at'])) return false;
  const ok = v['ok'];
  if (ok !== undefined && typeof ok !== 'boolean') return false;
  if (v['inputTokens'] !== undefined && !isCount(v['inputTokens'])) return false;
  if (v['outputTokens'] !== undefined && !isCount(v['outputTokens'])) return false;
  if (v['ttftMs'] !== undefined && !isDuration(v['ttftMs'])) return false;
  return v['tpotMs'] === undefined || isDuration(v['tpotMs']);
}

const isStrings = (v: unknown): v is string[] => Array.isArray(v) && v.every((s) => typeof s === 'string');

/** What `PackedLegsSchema` accepts field by field (the tables' indexes and the legs' lengths are `unpackLegs`'). */
function isPacked(v: unknown): v is PackedLegs {
  if (!isPlainObject(v)) return false;
  for (const k in v) if (!PACKED_KEYS.has(k)) return false;
  if (!isInt(v['at']) || !isStrings(v['requests']) || !isStrings(v['endpoints'])) return false;
  const legs = v['legs'];
  if (!Array.isArray(legs)) return false;
  for (let i = 0; i < legs.length; i++) {
    const leg: unknown = legs[i];
    if (!Array.isArray(leg) || leg.length < 4) return false;
    if (typeof leg[0] !== 'string' || !Object.hasOwn(PackedLegCodes, leg[0])) return false;
    if (!isCount(leg[1]) || !isCount(leg[2]) || !isInt(leg[3])) return false;
    for (let j = 4; j < leg.length; j++) if (!isDuration(leg[j])) return false;
  }
  return true;
}

/**
 * A `triad.v1.dispatch` batch read without zod, for the dispatch feed (every scheduler replica reads every gateway's
 * batches, about one per request, each with a few events): the batch itself when it is one `DispatchBatchSchema`
 * accepts with nothing to drop; otherwise undefined, and the caller runs the schema (which explains a refusal or
 * strips an unknown field). It never accepts what the schema refuses (`dispatch-read.test.ts` holds them side by
 * side), so the in-flight counts do not depend on which reader read the batch. A batch's `packed` legs are unpacked
 * into its `events` as the schema does (in a new batch object).
 */
export function readDispatchBatch(raw: unknown): DispatchBatch | undefined {
  if (!isPlainObject(raw)) return undefined;
  for (const k in raw) if (!BATCH_KEYS.has(k)) return undefined;
  if (raw['v'] !== SCHEMA_VERSION || typeof raw['gateway'] !== 'string' || !isCount(raw['seq'])) return undefined;
  const events = raw['events'];
  if (!Array.isArray(events)) return undefined;
  for (let i = 0; i < events.length; i++) if (!isEvent(events[i])) return undefined;
  const inflight = raw['inflight'];
  if (inflight !== undefined) {
    if (!isPlainObject(inflight)) return undefined;
    // `__proto__` as an own key (JSON.parse makes one) is left to the schema, which does not copy it as a count.
    for (const k in inflight) if (k === '__proto__' || !isCount(inflight[k])) return undefined;
  }
  const interval = raw['snapshotIntervalMs'];
  if (interval !== undefined && !(isInt(interval) && (interval as number) >= 1)) return undefined;
  const packed = raw['packed'];
  if (packed === undefined) return raw as unknown as DispatchBatch;
  if (!isPacked(packed)) return undefined;
  const unpacked = unpackLegs(packed);
  if (typeof unpacked === 'string') return undefined;
  if (events.length > 0) unpacked.unshift(...(events as DispatchBatch['events']));
  // A new object rather than `delete` (which would turn the parsed one into a dictionary).
  const batch: Record<string, unknown> = { v: raw['v'], gateway: raw['gateway'], seq: raw['seq'], events: unpacked };
  if (inflight !== undefined) batch['inflight'] = inflight;
  if (interval !== undefined) batch['snapshotIntervalMs'] = interval;
  return batch as unknown as DispatchBatch;
}
