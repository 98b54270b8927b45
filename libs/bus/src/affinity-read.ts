import type { AffinityBatch } from './affinity';
import { SCHEMA_VERSION } from './records';
import { SchedulingLimits } from './scheduling';

/** Every key `AffinityBatchSchema` knows: a batch with another one goes to the schema (which drops it). */
const BATCH_KEYS = new Set(['v', 'origin', 'records']);
/** Every key `AffinityRecordSchema` knows. */
const RECORD_KEYS = new Set(['model', 'endpoint', 'role', 'prefixHashes', 'mediaKeys', 'session']);
const ROLES = new Set(['aggregated', 'decode', 'prefill', 'encode']);
const MAX_RECORDS = 4096;

const isPlainObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

function isStrings(v: unknown, max: number): boolean {
  if (!Array.isArray(v) || v.length > max) return false;
  for (let i = 0; i < v.length; i++) if (typeof v[i] !== 'string') return false;
  return true;
}

function isRecord(v: unknown): boolean {
  if (!isPlainObject(v)) return false;
  for (const k in v) if (!RECORD_KEYS.has(k)) return false;
  const endpoint = v['endpoint'];
  const role = v['role'];
  if (typeof v['model'] !== 'string' || typeof endpoint !== 'string' || endpoint === '') return false;
  if (typeof role !== 'string' || !ROLES.has(role)) return false;
  const prefixHashes = v['prefixHashes'];
  if (prefixHashes !== undefined && !isStrings(prefixHashes, SchedulingLimits.maxPrefixHashes)) return false;
  const mediaKeys = v['mediaKeys'];
  if (mediaKeys !== undefined && !isStrings(mediaKeys, SchedulingLimits.maxMediaItems)) return false;
  return v['session'] === undefined || typeof v['session'] === 'string';
}

/**
 * A `triad.v1.affinity` batch read without zod, for the affinity feed (a gateway's fallback reads every batch of
 * the scheduler's, and each replica the others'): the batch itself, each record's `prefixHashes` default filled in,
 * when it is one `AffinityBatchSchema` accepts with nothing to drop; otherwise undefined, and the caller runs the
 * schema (which explains a refusal or strips an unknown field). It never accepts what the schema refuses
 * (`affinity-read.test.ts` holds them side by side), so what a replica learns does not depend on which reader read
 * the batch.
 */
export function readAffinityBatch(raw: unknown): AffinityBatch | undefined {
  if (!isPlainObject(raw)) return undefined;
  for (const k in raw) if (!BATCH_KEYS.has(k)) return undefined;
  const origin = raw['origin'];
  if (raw['v'] !== SCHEMA_VERSION || typeof origin !== 'string' || origin === '') return undefined;
  const records = raw['records'];
  if (!Array.isArray(records) || records.length < 1 || records.length > MAX_RECORDS) return undefined;
  for (let i = 0; i < records.length; i++) if (!isRecord(records[i])) return undefined;
  for (let i = 0; i < records.length; i++) {
    const r = records[i] as Record<string, unknown>;
    if (r['prefixHashes'] === undefined) r['prefixHashes'] = [];
  }
  return raw as unknown as AffinityBatch;
}
